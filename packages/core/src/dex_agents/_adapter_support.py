"""What every framework adapter needs from the runner contract, written once.

The adapters for Pydantic AI, the OpenAI Agents SDK, LangGraph and Claude each
used to carry their own copy of these rules; a team that switches frameworks,
or an operator who runs several, now sees the same names and the same behaviour:

* the current tool call and model step, readable from code the framework runs
  (``get_deferred_tool_execution()``, ``get_model_step_context()``), set by the
  runner with ``serving_deferred_tool_execution`` / ``serving_model_step``;
* the metadata keys a tool declares its effect and approval with
  (``dex_effect``, ``dex_requires_approval``) and the policy precedence:
  session ``ToolPolicy``, then the tool's declaration, then the default effect;
* the fixed policies of enabled built-in tools (``BUILT_IN_TOOL_POLICY``, defined
  with the built-in tools) and of tools the runner does not have;
* the answer each tool call of a stored response gets before the next model
  call: its final record's text, or the outcome-unknown text when it has none;
* the usage of one model response and the turn's model call counter kept in
  ``framework_run_state``;
* the display fields of stored messages (``response_messages``): one assistant
  message per tool call, the same in every runner;
* deprecated old names that still import, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from dex_agents._builtin_tools import BUILT_IN_TOOL_POLICY
from dex_agents._contract import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ModelCallMetadata,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
    default_requires_approval,
)
from dex_agents._deprecation import deprecated_aliases
from dex_agents._texts import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    describe_tool_call_outcome,
    unknown_tool_error,
)
from dex_agents._values import AgentToolCallStatus, AgentUsage, FrameworkMessage, ToolEffect

__all__ = [
    "BUILT_IN_TOOL_POLICY",
    "DEX_EFFECT_METADATA_KEY",
    "DEX_IDEMPOTENCY_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "DISPLAY_ONLY_FRAMEWORK_ITEM",
    "MCP_IDEMPOTENCY_KEY_META_KEY",
    "MOVED_TO_DEX_AGENTS",
    "UNKNOWN_TOOL_POLICY",
    "ToolCallAnswer",
    "ToolCallDisplay",
    "answer_tool_call",
    "check_model_tool_call_id",
    "counted_model_step_outcome",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "declared_approval_in",
    "declared_effect_in",
    "decode_model_call_count",
    "deprecated_aliases",
    "encode_model_call_count",
    "get_deferred_tool_execution",
    "get_model_step_context",
    "is_display_only",
    "known_tool",
    "mcp_idempotency_meta",
    "resolve_declared_tool_policy",
    "response_messages",
    "serving_deferred_tool_execution",
    "serving_model_step",
    "single_response_usage",
    "tool_arguments_object",
    "tool_declaration_metadata",
]

# --- names shared by every adapter ---------------------------------------------------

DEX_EFFECT_METADATA_KEY = "dex_effect"
"""Tool metadata key of the tool's ``ToolEffect`` (the enum or its wire value, e.g. ``"read"``)."""

DEX_REQUIRES_APPROVAL_METADATA_KEY = "dex_requires_approval"
"""Tool metadata key of whether the tool's calls wait for approval (a bool)."""

DEX_IDEMPOTENCY_KEY = "dex_idempotency_key"
"""Key of the call's idempotency key where a framework hands a tool a mapping (metadata, config)."""

MCP_IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"
"""Where an MCP ``tools/call`` carries the session's idempotency key in ``_meta``."""

UNKNOWN_TOOL_POLICY = ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
"""Policy of a call of a tool the runner surely does not have: it fails without any effect."""


# --- the call and the step that are running -------------------------------------------

_deferred_tool_execution: ContextVar[DeferredToolExecution | None] = ContextVar(
    "dex_agents_deferred_tool_execution", default=None
)
_model_step: ContextVar[AgentTurnContext | None] = ContextVar("dex_agents_model_step", default=None)


def get_deferred_tool_execution() -> DeferredToolExecution:
    """The session tool call the running tool serves.

    It has ``idempotency_key`` (``<flow_id>/<turn_id>/<tool_call_id>``, the same
    on every attempt: pass it to the remote system so a retried write is dropped),
    ``attempt``, ``tool_call`` (the record), ``heartbeat()``, ``heartbeat_checkpoint``
    and ``save_heartbeat_checkpoint(text)``. Raises ``LookupError`` outside a
    tool call that a dex-agents session runs.
    """
    execution = _deferred_tool_execution.get()
    if execution is None:
        raise LookupError(
            "get_deferred_tool_execution() is only available inside a tool that a dex-agents"
            " session runs (in CallTool or CallSingleAttemptTool)"
        )
    return execution


def current_deferred_tool_execution() -> DeferredToolExecution | None:
    """Like ``get_deferred_tool_execution()``, but ``None`` outside a session tool call."""
    return _deferred_tool_execution.get()


def mcp_idempotency_meta() -> dict[str, str] | None:
    """``{MCP_IDEMPOTENCY_KEY_META_KEY: key}`` inside a session tool call, else ``None``.

    Merge it into the ``_meta`` of a framework's own MCP ``tools/call`` from a tool Step.
    """
    execution = _deferred_tool_execution.get()
    if execution is None:
        return None
    return {MCP_IDEMPOTENCY_KEY_META_KEY: execution.idempotency_key}


def get_model_step_context() -> AgentTurnContext:
    """The turn whose model step is running (``flow_id``, ``turn_id``, ``attempt``, ``events``).

    Code the framework runs during the model call (a model wrapper, a dynamic
    instruction) can read it. Raises ``LookupError`` outside a ``RunModel`` step.
    """
    turn = _model_step.get()
    if turn is None:
        raise LookupError(
            "get_model_step_context() is only available inside a dex-agents RunModel step"
        )
    return turn


def current_model_step_context() -> AgentTurnContext | None:
    """Like ``get_model_step_context()``, but ``None`` outside a model step."""
    return _model_step.get()


@contextmanager
def serving_deferred_tool_execution(call: DeferredToolExecution) -> Generator[None]:
    """Make ``call`` the running tool call for the block (for the adapter's tool step)."""
    if not isinstance(call, DeferredToolExecution):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"call must be a DeferredToolExecution, got {type(call).__name__}")
    token = _deferred_tool_execution.set(call)
    try:
        yield
    finally:
        _deferred_tool_execution.reset(token)


@contextmanager
def serving_model_step(turn: AgentTurnContext) -> Generator[None]:
    """Make ``turn`` the running model step for the block (for the adapter's model step)."""
    if not isinstance(turn, AgentTurnContext):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"turn must be an AgentTurnContext, got {type(turn).__name__}")
    token = _model_step.set(turn)
    try:
        yield
    finally:
        _model_step.reset(token)


# --- what a tool declares, and the policy of a call -----------------------------------


def tool_declaration_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata declaring ``effect`` (and approval, when given) to the session."""
    try:
        declared = ToolEffect(effect)
    except ValueError:
        raise ValueError(
            f"effect must be a ToolEffect or one of {[e.value for e in ToolEffect]}, got {effect!r}"
        ) from None
    metadata: dict[str, Any] = {DEX_EFFECT_METADATA_KEY: declared.value}
    if requires_approval is not None:
        if not isinstance(requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"requires_approval must be a bool or None, got {requires_approval!r}")
        metadata[DEX_REQUIRES_APPROVAL_METADATA_KEY] = requires_approval
    return metadata


def declared_effect_in(metadata: Mapping[str, Any] | None, tool_name: str) -> ToolEffect | None:
    """The effect a tool's ``metadata`` declares, or ``None``; ``ValueError`` for a bad value."""
    value = (metadata or {}).get(DEX_EFFECT_METADATA_KEY)
    if value is None:
        return None
    try:
        return ToolEffect(value)
    except ValueError:
        raise ValueError(
            f"tool {tool_name!r} declares {DEX_EFFECT_METADATA_KEY}={value!r};"
            f" use one of {[effect.value for effect in ToolEffect]}"
        ) from None


def declared_approval_in(metadata: Mapping[str, Any] | None, tool_name: str) -> bool | None:
    """Whether a tool's ``metadata`` asks for approval, or ``None``; a non-bool is refused."""
    value = (metadata or {}).get(DEX_REQUIRES_APPROVAL_METADATA_KEY)
    if value is not None and not isinstance(value, bool):
        raise ValueError(
            f"tool {tool_name!r} declares {DEX_REQUIRES_APPROVAL_METADATA_KEY}={value!r};"
            " use True or False"
        )
    return value


def resolve_declared_tool_policy(
    turn: AgentTurnContext,
    tool_name: str,
    declared_effect: ToolEffect | None,
    declared_approval: bool | None,
) -> ResolvedToolPolicy:
    """The policy of a call: session ``ToolPolicy``, then the tool's declaration, then default.

    A declared approval applies only when the session has no ``ToolPolicy`` for
    the tool; without one, approval follows the effect.
    """
    if tool_name in turn.tool_policies:
        return turn.resolve_tool_policy(tool_name)
    resolved = turn.resolve_tool_policy(tool_name, declared_effect)
    if declared_approval is None:
        return ResolvedToolPolicy(resolved.effect, default_requires_approval(resolved.effect))
    return ResolvedToolPolicy(resolved.effect, declared_approval)


def check_model_tool_call_id(tool_name: str, tool_call_id: str | None) -> str:
    """``tool_call_id`` when the session can key a call by it; ``RuntimeError`` otherwise.

    The session builds idempotency keys as ``<flow>/<turn>/<call>``, so an empty
    ID, or one with ``/``, from a model is refused (the model step is retried).
    """
    if not tool_call_id or "/" in tool_call_id:
        raise RuntimeError(
            f"the model's call of {tool_name!r} has tool call ID {tool_call_id!r}; the session"
            " needs a non-empty ID without '/'"
        )
    return tool_call_id


_ToolT = TypeVar("_ToolT")


def known_tool(tools: Mapping[str, _ToolT], tool_name: str) -> _ToolT:
    """The runner's tool named ``tool_name``; ``ToolExecutionError`` (seen by the model) if none.

    The tool Step fails without running anything, and the model reads that it
    has no such tool.
    """
    tool = tools.get(tool_name)
    if tool is None:
        raise ToolExecutionError(unknown_tool_error(tool_name))
    return tool


def tool_arguments_object(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as an object; ``ToolExecutionError`` (seen by the model) if not.

    Empty text counts as ``{}``. The tool Step fails without running the tool,
    so the model can correct its call.
    """
    try:
        parsed: Any = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        raise ToolExecutionError(f"the tool arguments are not valid JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise ToolExecutionError(
            f"the tool arguments must be a JSON object, got {type(parsed).__name__}"
        )
    return cast(dict[str, Any], parsed)


# --- the answer every call gets before the next model call ----------------------------


@dataclass(frozen=True)
class ToolCallAnswer:
    """What the model sees for one call: the text, and whether it is an error or a rejection."""

    text: str
    status: AgentToolCallStatus | None
    """The final record's status, or ``None`` when the call has no final record."""

    @property
    def is_error(self) -> bool:
        """Anything but a success is an error result for the model."""
        return self.status is not AgentToolCallStatus.SUCCEEDED

    @property
    def is_rejection(self) -> bool:
        return self.status is AgentToolCallStatus.REJECTED


def answer_tool_call(turn: AgentTurnContext, tool_call_id: str) -> ToolCallAnswer:
    """The answer to ``tool_call_id``: its final record's text, or the outcome-unknown text.

    A stored call without a final record (a turn that failed before its result
    was stored) still needs exactly one result, or providers refuse the history;
    the model is told the outcome is unknown.
    """
    record = turn.recorded_tool_call(tool_call_id)
    if record is None or not record.is_final:
        return ToolCallAnswer(OUTCOME_UNKNOWN_TOOL_RESULT, None)
    return ToolCallAnswer(describe_tool_call_outcome(record), record.status)


# --- usage and the turn's model call counter ------------------------------------------


def single_response_usage(
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    total_tokens: int | None = None,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> AgentUsage:
    """The ``AgentUsage`` of one model response (``model_calls=1``); ``None`` counts as 0.

    ``total_tokens`` defaults to input plus output. Give the response's own
    counts, never a run's running totals: the session adds them up.
    """
    inputs = input_tokens or 0
    outputs = output_tokens or 0
    return AgentUsage(
        model_calls=1,
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=total_tokens if total_tokens is not None else inputs + outputs,
        cache_read_tokens=cache_read_tokens or 0,
        cache_write_tokens=cache_write_tokens or 0,
        reasoning_tokens=reasoning_tokens or 0,
    )


_MODEL_CALL_COUNT_VERSION = 1


def encode_model_call_count(model_calls: int) -> str:
    """A ``framework_run_state`` that holds only how many model calls the turn made."""
    if type(model_calls) is not int or model_calls < 0:
        raise ValueError(f"model_calls must be a non-negative int, got {model_calls!r}")
    return json.dumps({"version": _MODEL_CALL_COUNT_VERSION, "model_calls": model_calls})


def decode_model_call_count(framework_run_state: str | None) -> int:
    """The turn's model calls so far: 0 before the first; ``ValueError`` for a foreign state."""
    if framework_run_state is None:
        return 0
    try:
        data: Any = json.loads(framework_run_state)
        model_calls = data["model_calls"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"framework_run_state {framework_run_state!r} is not a model call count: {error}"
        ) from error
    if type(model_calls) is not int or model_calls < 0:
        raise ValueError(f"framework_run_state {framework_run_state!r} is not a model call count")
    return model_calls


def counted_model_step_outcome(
    model_calls_before: int,
    *,
    new_messages: Sequence[FrameworkMessage],
    tool_calls: Sequence[DeferredToolCall],
    usage: AgentUsage,
    model_call_metadata: ModelCallMetadata | None,
) -> AgentTurnOutcome:
    """The outcome of a model step of one model call, for a runner that counts its calls.

    Without ``tool_calls`` the turn completes. With them, the calls are requested
    and ``framework_run_state`` holds the turn's model calls including this one
    (``encode_model_call_count``), for the next step's ``decode_model_call_count``.
    """
    if not tool_calls:
        return TurnCompleted(
            new_messages=new_messages, usage=usage, model_call_metadata=model_call_metadata
        )
    return ToolCallsRequested(
        framework_run_state=encode_model_call_count(model_calls_before + 1),
        tool_calls=tool_calls,
        usage=usage,
        new_messages=new_messages,
        model_call_metadata=model_call_metadata,
    )


# --- display fields of stored messages -----------------------------------------------

DISPLAY_ONLY_FRAMEWORK_ITEM = "null"
"""``framework_item`` of a message stored only to show a tool call; replay skips it."""


@dataclass(frozen=True)
class ToolCallDisplay:
    """One tool call of a model response as the stored messages show it."""

    tool_call_id: str
    tool_name: str
    arguments: str
    """The call's arguments as JSON object text."""


def response_messages(
    framework_item: str, *, text: str | None, tool_calls: Sequence[ToolCallDisplay]
) -> list[FrameworkMessage]:
    """The stored assistant messages of one model response, display fields filled alike.

    Every runner shows a response the same way: one assistant message per tool
    call, in the model's order, with ``tool_call_id``, ``tool_name`` and
    ``tool_arguments``; the response's text on the first of them (or on the one
    message of a response without calls). The first message carries
    ``framework_item``; the others ``DISPLAY_ONLY_FRAMEWORK_ITEM``, which replay skips.
    """
    if not tool_calls:
        return [FrameworkMessage(role="assistant", framework_item=framework_item, text=text)]
    return [
        FrameworkMessage(
            role="assistant",
            framework_item=framework_item if index == 0 else DISPLAY_ONLY_FRAMEWORK_ITEM,
            text=text if index == 0 else None,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            tool_arguments=call.arguments,
        )
        for index, call in enumerate(tool_calls)
    ]


def is_display_only(framework_item: str) -> bool:
    """Whether a stored message only shows a tool call (``response_messages``)."""
    return framework_item == DISPLAY_ONLY_FRAMEWORK_ITEM


# --- deprecated names -------------------------------------------------------------------


MOVED_TO_DEX_AGENTS: Mapping[str, tuple[str, object]] = {
    function.__name__: (f"dex_agents.runner.{new}", function)
    for function, new in (
        (current_deferred_tool_execution, "get_deferred_tool_execution (it raises LookupError)"),
        (current_model_step_context, "get_model_step_context (it raises LookupError)"),
        (get_deferred_tool_execution, "get_deferred_tool_execution"),
        (get_model_step_context, "get_model_step_context"),
    )
}
"""The names every adapter package used to re-export, for its ``deprecated_aliases``."""
