"""The session Steps' only contact with ``dex_agents.tracing``: one call per hook.

The ``AgentTraceContext`` Attribute holds the activation root's ``traceparent``,
written in the same commit as the Step that emitted the root.
"""

from __future__ import annotations

from typing import Any

from dex import AsyncContext

from dex_agents._values import AgentMessage, AgentToolCall
from dex_agents.session._store import SessionDefinition, read_optional
from dex_agents.tracing import SessionTracer, StepIdentity
from dex_agents.tracing._spans import ModelCallSpan, ToolCallSpan

__all__ = ["model_call_span", "read_trace_context", "tool_call_span", "trace_activation"]

_TRACERS: dict[int, tuple[Any, SessionTracer]] = {}


def _tracer(session: SessionDefinition) -> SessionTracer:
    options = session.options.tracing
    cached = _TRACERS.get(id(session))
    if cached is None or cached[0] is not session:
        cached = (session, SessionTracer(options, session.flow_type))
        _TRACERS[id(session)] = cached
    return cached[1]


def read_trace_context(context: AsyncContext, session: SessionDefinition) -> str | None:
    return read_optional(session.persistence.agent_trace_context, context)


def trace_activation(
    context: AsyncContext, session: SessionDefinition, step_type: str, turn_id: str
) -> str | None:
    """Emit the activation root and store its ``traceparent`` (or delete the stored one)."""
    previous = read_trace_context(context, session)
    identity = StepIdentity.of(context, step_type, turn_id)
    traceparent = _tracer(session).activation(identity, previous)
    attribute = session.persistence.agent_trace_context
    if traceparent is not None:
        attribute.set(context, traceparent)
    elif previous is not None:
        attribute.delete(context)
    return traceparent


def model_call_span(
    context: AsyncContext,
    session: SessionDefinition,
    turn_id: str,
    messages: tuple[AgentMessage, ...] | list[AgentMessage],
    parent: str | None,
    step_type: str = "RunModel",
) -> ModelCallSpan:
    """The ``chat`` span of a ``RunModel`` attempt, or of ``CompactContext``'s summary call
    (which stores no messages, so its span names none as output)."""
    identity = StepIdentity.of(context, step_type, turn_id)
    span = _tracer(session).model_call(identity, parent, messages)
    if step_type == "RunModel":
        span.first_output_sequence = (messages[-1].sequence + 1) if messages else 1
    return span


def tool_call_span(
    context: AsyncContext, session: SessionDefinition, step_type: str, record: AgentToolCall
) -> ToolCallSpan:
    return _tracer(session).tool_call(StepIdentity.of(context, step_type, record.turn_id), record)
