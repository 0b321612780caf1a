"""The session's OpenTelemetry GenAI spans, through ``opentelemetry-api`` only.

Every OpenTelemetry call is guarded: tracing never fails or retries a Step. The
first failure is logged as a warning, later ones at debug level, and the span is
skipped. Without ``opentelemetry-api`` installed, or with ``is_enabled=False``,
nothing is imported and every method is a no-op.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Any, Self, TypeVar

from dex_agents._values import AgentMessage, AgentToolCall, message_sequence_key
from dex_agents.tracing._options import GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS, TracingOptions

__all__ = [
    "INSTRUMENTATION_SCOPE",
    "ModelCallSpan",
    "SessionTracer",
    "StepIdentity",
    "ToolCallSpan",
]

INSTRUMENTATION_SCOPE = "dex-agents"
"""The OpenTelemetry instrumentation scope of the session's spans."""
# The documented logger name (README), not the module's.
_LOG = logging.getLogger("dex_agents.tracing.spans")
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_T = TypeVar("_T")


@dataclass(frozen=True)
class StepIdentity:
    """Where a span was emitted: the attributes every span of the session carries."""

    flow_id: str
    run_id: str
    step_type: str
    step_execution_id: str
    attempt: int
    turn_id: str

    @staticmethod
    def of(context: Any, step_type: str, turn_id: str) -> StepIdentity:
        # getattr: a hand-built context in a unit test may lack some of them.
        return StepIdentity(
            str(getattr(context, "flow_id", "")),
            str(getattr(context, "run_id", "")),
            step_type,
            str(getattr(context, "step_execution_id", "")),
            int(getattr(context, "attempt", 0)),
            turn_id,
        )

    def attributes(self) -> dict[str, Any]:
        return {
            "gen_ai.conversation.id": self.flow_id,
            "session.id": self.flow_id,
            "dex.flow.id": self.flow_id,
            "dex.run.id": self.run_id,
            "dex.step.type": self.step_type,
            "dex.step.execution_id": self.step_execution_id,
            "dex.step.attempt": self.attempt,
            "dex.agent.turn.id": self.turn_id,
        }


@dataclass
class _Guard:
    warned: bool = False

    def run(self, what: str, call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        except Exception as error:  # tracing never fails a Step
            log = _LOG.debug if self.warned else _LOG.warning
            self.warned = True
            log("tracing: %s failed, span skipped: %r", what, error)
            return None


_GUARD = _Guard()


class SessionTracer:
    """Emits the spans of one session Flow type."""

    def __init__(self, options: TracingOptions | None, flow_type: str) -> None:
        self.options = options or TracingOptions()
        self.agent_name = self.options.agent_name or flow_type
        self._tracer: Any = None
        self._loaded = False

    @property
    def legacy(self) -> bool:
        return self.options.semantic_conventions_version == "1.36.0"

    @property
    def captures_content(self) -> bool:
        return self.options.capture_message_content and not self.legacy

    def tracer(self) -> Any:
        """The OpenTelemetry tracer, or ``None`` when disabled or the API is not installed."""
        if self._loaded:
            return self._tracer
        self._loaded = True
        if not self.options.is_enabled:
            return None
        try:
            from opentelemetry import trace
        except ImportError:
            return None
        schema = GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS[self.options.semantic_conventions_version]

        def make() -> Any:
            provider = self.options.tracer_provider or trace.get_tracer_provider()
            return provider.get_tracer(INSTRUMENTATION_SCOPE, _package_version(), schema)

        self._tracer = _GUARD.run("getting the tracer", make)
        return self._tracer

    # --- activation roots ----------------------------------------------------------

    def activation(self, step: StepIdentity, previous: str | None) -> str | None:
        """Emit the ``invoke_agent`` root of an activation (ended at once, linked to the
        previous root); return its ``traceparent`` to store, or ``None`` to delete it."""
        tracer = self.tracer()
        if tracer is None:
            return None

        def emit() -> str | None:
            from opentelemetry import context as otel_context
            from opentelemetry import trace

            links: list[Any] = []
            previous_context = _span_context(previous)
            if previous_context is not None:
                links.append(trace.Link(previous_context))
            attributes = {
                **step.attributes(),
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent_name,
            }
            span = tracer.start_span(
                f"invoke_agent {self.agent_name}",
                context=otel_context.Context(),  # a root: never under an ambient span
                kind=trace.SpanKind.INTERNAL,
                attributes=attributes,
                links=links,
            )
            span.end()
            return format_traceparent(span.get_span_context())

        return _GUARD.run("the invoke_agent span", emit)

    # --- model calls and tool calls ------------------------------------------------

    def model_call(
        self, step: StepIdentity, parent: str | None, messages: Sequence[AgentMessage]
    ) -> ModelCallSpan:
        return ModelCallSpan(self, step, parent, messages)

    def tool_call(self, step: StepIdentity, record: AgentToolCall) -> ToolCallSpan:
        return ToolCallSpan(self, step, record)


class _SyncAndAsync:
    """Lets a span wrapper be entered with ``with`` or ``async with`` (beside other async
    context managers in one statement)."""

    def __enter__(self) -> Self:
        raise NotImplementedError

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.__exit__(kind, error, traceback)


@dataclass
class ModelCallSpan(_SyncAndAsync):
    """Context manager around one model call: the root is current while it runs, and the
    ``chat`` span is emitted when it ends (from the attempt's start time)."""

    tracer: SessionTracer
    step: StepIdentity
    parent: str | None
    messages: Sequence[AgentMessage]
    outcome: Any = None
    """Set to the runner's outcome before leaving the block."""
    first_output_sequence: int = 0
    _start: int = 0
    _token: Any = None

    def __enter__(self) -> ModelCallSpan:
        self._start = time.time_ns()
        if self.tracer.tracer() is not None:
            self._token = _GUARD.run("attaching the activation", lambda: _attach(self.parent))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        tracer = self.tracer.tracer()
        if tracer is None:
            return
        if self._token is not None:
            _GUARD.run("detaching the activation", lambda: _detach(self._token))
        _GUARD.run("the chat span", lambda: self._emit(tracer, error))

    def _emit(self, tracer: Any, error: BaseException | None) -> None:
        from opentelemetry import trace

        metadata = getattr(self.outcome, "model_call_metadata", None)
        usage = getattr(self.outcome, "usage", None)
        single = usage is not None and usage.model_calls == 1
        attributes: dict[str, Any] = {**self.step.attributes(), "gen_ai.operation.name": "chat"}
        request_model = getattr(metadata, "request_model", None)
        if metadata is not None:
            provider = getattr(metadata, "provider_name", None)
            for name, value in (
                ("gen_ai.request.model", request_model),
                ("gen_ai.response.model", getattr(metadata, "response_model", None)),
                ("gen_ai.response.id", getattr(metadata, "response_id", None)),
                ("gen_ai.system" if self.tracer.legacy else "gen_ai.provider.name", provider),
            ):
                if value:
                    attributes[name] = value
            reasons = getattr(metadata, "finish_reasons", None)
            if reasons:
                attributes["gen_ai.response.finish_reasons"] = list(reasons)
        if single and usage is not None and (usage.input_tokens or usage.output_tokens):
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            if not self.tracer.legacy:
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
                attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
        attributes.update(self._content())
        span = tracer.start_span(
            f"chat {request_model}" if request_model else "chat",
            context=_parent_context(self.parent),
            kind=trace.SpanKind.CLIENT if single else trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self._start,
        )
        _set_error(span, error)
        span.end()

    def _content(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        if self.messages:
            last = self.messages[-1].sequence
            attributes["dex.agent.input_messages.last_key"] = message_sequence_key(last)
        produced = list(getattr(self.outcome, "new_messages", None) or ())
        if produced and self.first_output_sequence > 0:
            attributes["dex.agent.output_messages.keys"] = [
                message_sequence_key(self.first_output_sequence + index)
                for index in range(len(produced))
            ]
        calls = list(getattr(self.outcome, "tool_calls", None) or ())
        if calls:
            attributes["dex.agent.requested_tool_call.ids"] = [c.tool_call_id for c in calls]
        if self.tracer.captures_content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [_message_json(m) for m in self.messages], ensure_ascii=False
            )
            output = [_message_json(m) for m in produced]
            summary = getattr(self.outcome, "summary", None)
            if isinstance(summary, str):  # CompactContext's summary call
                text = {"type": "text", "content": summary}
                output.append({"role": "assistant", "parts": [text]})
            output += [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": c.tool_call_id,
                            "name": c.tool_name,
                            "arguments": c.arguments,
                        }
                    ],
                }
                for c in calls
            ]
            attributes["gen_ai.output.messages"] = json.dumps(output, ensure_ascii=False)
        return attributes


@dataclass
class ToolCallSpan(_SyncAndAsync):
    """Context manager around one tool call: its ``execute_tool`` span is current while it runs,
    parented from the record's ``trace_context``. Set ``result`` for content capture."""

    tracer: SessionTracer
    step: StepIdentity
    record: AgentToolCall
    result: str | None = None
    _span: Any = None
    _token: Any = None

    def __enter__(self) -> ToolCallSpan:
        tracer = self.tracer.tracer()
        if tracer is not None:
            self._span = _GUARD.run("the execute_tool span", lambda: self._start(tracer))
            if self._span is not None:
                self._token = _GUARD.run("activating execute_tool", lambda: _activate(self._span))
        return self

    def _start(self, tracer: Any) -> Any:
        from opentelemetry import trace

        record = self.record
        attributes: dict[str, Any] = {
            **self.step.attributes(),
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": record.tool_name,
            "gen_ai.tool.call.id": record.tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if self.tracer.captures_content:
            attributes["gen_ai.tool.call.arguments"] = record.arguments
        return tracer.start_span(
            f"execute_tool {record.tool_name}",
            context=_parent_context(record.trace_context),
            kind=trace.SpanKind.INTERNAL,
            attributes=attributes,
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self._span
        if span is None:
            return
        if self._token is not None:
            _GUARD.run("deactivating execute_tool", lambda: _detach(self._token))

        def finish() -> None:
            if self.result is not None and self.tracer.captures_content:
                span.set_attribute("gen_ai.tool.call.result", self.result)
            _set_error(span, error)
            span.end()

        _GUARD.run("ending execute_tool", finish)


# --- OpenTelemetry helpers (imported lazily) ---------------------------------------------


def format_traceparent(span_context: Any) -> str | None:
    """The W3C ``traceparent`` of a valid span context (sampled or not), else ``None``."""
    if span_context is None or not span_context.is_valid:
        return None
    flags = int(span_context.trace_flags)
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{flags:02x}"


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (a tool Step's ``execute_tool``), or ``None``
    without OpenTelemetry or a valid current span; never raises.

    Put it in the ``_meta`` of a framework's own MCP ``tools/call`` under ``"traceparent"``,
    as ``dex_agents.mcp`` does, so the server's spans join the session's trace.
    """
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    try:
        return format_traceparent(trace.get_current_span().get_span_context())
    except Exception:  # tracing must never fail a call
        return None


def _span_context(traceparent: str | None) -> Any:
    if not traceparent:
        return None
    match = _TRACEPARENT.match(traceparent)
    if match is None:
        return None
    from opentelemetry import trace

    trace_id, span_id, flags = (int(group, 16) for group in match.groups())
    span_context = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
    )
    return span_context if span_context.is_valid else None


def _parent_context(traceparent: str | None) -> Any:
    """An OpenTelemetry Context whose current span is ``traceparent``'s (empty without one)."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    span_context = _span_context(traceparent)
    if span_context is None:
        return otel_context.Context()
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context), otel_context.Context())


def _attach(traceparent: str | None) -> Any:
    from opentelemetry import context as otel_context

    return otel_context.attach(_parent_context(traceparent))


def _activate(span: Any) -> Any:
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    return otel_context.attach(trace.set_span_in_context(span))


def _detach(token: Any) -> None:
    from opentelemetry import context as otel_context

    otel_context.detach(token)


def _set_error(span: Any, error: BaseException | None) -> None:
    if error is None:
        return
    from opentelemetry import trace

    span.set_attribute("error.type", type(error).__name__)
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)))


def _message_json(message: Any) -> dict[str, Any]:
    role = getattr(message, "role", "assistant")
    parts: list[dict[str, Any]] = []
    if getattr(message, "text", None):
        parts.append({"type": "text", "content": message.text})
    if getattr(message, "tool_output", None) is not None:
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": message.tool_output,
            }
        )
    elif getattr(message, "tool_call_id", None):
        parts.append(
            {
                "type": "tool_call",
                "id": message.tool_call_id,
                "name": message.tool_name,
                "arguments": message.tool_arguments,
            }
        )
    return {"role": role, "parts": parts}


def _package_version() -> str:
    try:
        return version("dex-agents")
    except PackageNotFoundError:
        return "0"
