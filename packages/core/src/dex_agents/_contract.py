"""The runner contract: what an agent framework supplies to the session Flow.

The session owns Steps, persistence, RPCs, events, approvals and recovery. A
runner turns the framework into three operations, each called from its own Dex
Step:

* ``build_user_message(text)``: the framework's user message (pure, synchronous).
* ``run_model_step(turn)``: at most one model call, never a tool; returns
  ``TurnCompleted`` or ``ToolCallsRequested``.
* ``execute_deferred_tool_call(call)``: one tool call, in ``CallTool`` or
  ``CallSingleAttemptTool``, possibly in parallel with its siblings.

A runner that offers only ``write_todos`` in a planning turn sets the class
attribute ``supports_plan_mode = True``; see ``build_plan_note``.

A runner that stores the turn's messages as it goes (``ToolCallsRequested.new_messages``)
also implements ``build_unfinished_turn_messages(turn)``; see
``SupportsUnfinishedTurnMessages``.

Keep no state between calls: the next call may run in another Worker process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from dex_agents._values import (
    AgentMessage,
    AgentPlan,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    ContextSummary,
    FrameworkMessage,
    InteractionMode,
    ToolEffect,
)

__all__ = [
    "AgentEventWriter",
    "AgentFrameworkRunner",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "CancellationSignal",
    "DeferredToolCall",
    "DeferredToolExecution",
    "DeferredToolOutcome",
    "ModelCallMetadata",
    "QuestionAnswer",
    "QuestionResolution",
    "ResolvedToolPolicy",
    "RunnerDefectError",
    "SupportsToolTasks",
    "SupportsUnfinishedTurnMessages",
    "ToolCallsRequested",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolInputRequested",
    "ToolPolicy",
    "ToolTaskCancellation",
    "ToolTaskPending",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskStarted",
    "TurnCompleted",
    "default_requires_approval",
    "model_call_metadata",
    "resolve_tool_policy",
    "supports_plan_mode",
    "supports_tool_task_polling",
]

JsonValue = Any
"""A JSON-compatible value (dict, list, str, int, float, bool or None)."""


# --- tool policies -----------------------------------------------------------------


def default_requires_approval(effect: ToolEffect) -> bool:
    """Whether ``effect`` asks for approval by default: only writes that must not repeat do."""
    return effect in (ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.UNCLASSIFIED)


@dataclass(frozen=True)
class ToolPolicy:
    """The session's policy for one tool, by name in ``tool_policies``.

    ``requires_approval`` of ``None`` follows the effect: approval for
    ``non_idempotent_write`` and ``unclassified``, none otherwise.
    """

    effect: ToolEffect
    requires_approval: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.effect, ToolEffect):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ToolPolicy.effect must be a ToolEffect, got {self.effect!r}")
        if self.requires_approval is not None and not isinstance(self.requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("ToolPolicy.requires_approval must be a bool or None")


@dataclass(frozen=True)
class ResolvedToolPolicy:
    """The effective effect and approval of one tool call."""

    effect: ToolEffect
    requires_approval: bool

    def __post_init__(self) -> None:
        if not isinstance(self.effect, ToolEffect):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ResolvedToolPolicy.effect must be a ToolEffect, got {self.effect!r}")
        if not isinstance(self.requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("ResolvedToolPolicy.requires_approval must be a bool")


def _tool_effect(value: ToolEffect | str) -> ToolEffect:
    """``value`` as a ``ToolEffect``; a framework may report the effect's text, such as "read"."""
    try:
        return ToolEffect(value)
    except ValueError:
        allowed = ", ".join(repr(effect.value) for effect in ToolEffect)
        raise ValueError(f"unknown tool effect {value!r}; use one of {allowed}") from None


def resolve_tool_policy(
    tool_name: str,
    framework_effect: ToolEffect | str | None,
    tool_policies: Mapping[str, ToolPolicy],
    default_tool_effect: ToolEffect,
) -> ResolvedToolPolicy:
    """The policy of ``tool_name``: its ``ToolPolicy``, else the framework effect, else default.

    Approval comes from the policy when it sets one, else from the effect.
    """
    policy = tool_policies.get(tool_name)
    if policy is not None:
        requires_approval = (
            policy.requires_approval
            if policy.requires_approval is not None
            else default_requires_approval(policy.effect)
        )
        return ResolvedToolPolicy(policy.effect, requires_approval)
    effect = _tool_effect(framework_effect) if framework_effect is not None else default_tool_effect
    return ResolvedToolPolicy(effect, default_requires_approval(effect))


# --- model step outcomes -----------------------------------------------------------


@dataclass(frozen=True)
class ModelCallMetadata:
    """What the framework reports about one model call; names tracing spans, never stored."""

    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] | None = None


def model_call_metadata(
    *,
    request_model: str | None = None,
    response_model: str | None = None,
    provider_name: str | None = None,
    response_id: str | None = None,
    finish_reasons: Sequence[str] | None = None,
) -> ModelCallMetadata:
    """Build ``ModelCallMetadata``; omit what the framework does not expose."""
    return ModelCallMetadata(
        request_model=request_model,
        response_model=response_model,
        provider_name=provider_name,
        response_id=response_id,
        finish_reasons=tuple(finish_reasons) if finish_reasons is not None else None,
    )


@dataclass(frozen=True)
class DeferredToolCall:
    """One tool call the model asked for, to run in its own Step.

    ``tool_call_id`` must be non-empty, contain no ``/``, and be unique in the turn.
    ``arguments`` is the JSON text the model produced. ``policy`` is usually
    ``turn.resolve_tool_policy(tool_name, framework_effect)``.
    ``tool_source_reference`` is opaque text stored on the record for the tool's source.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    policy: ResolvedToolPolicy
    tool_source_reference: str | None = None


@dataclass(frozen=True)
class TurnCompleted:
    """The model gave its final answer.

    ``new_messages`` are every message of the turn not stored yet, in order: with
    incremental messages, what the last ``ToolCallsRequested`` did not carry;
    otherwise everything after the turn's user message. ``usage`` covers this
    model call only.
    """

    new_messages: Sequence[FrameworkMessage]
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = None
    kind: Literal["completed"] = field(default="completed", init=False)


@dataclass(frozen=True)
class ToolCallsRequested:
    """The model asked for tools; the session runs each in its own Step.

    ``framework_run_state`` is non-empty text, opaque to the session, from which
    the next ``run_model_step`` continues the turn. ``tool_calls`` holds at least
    one call, in the order the model made them. ``new_messages`` are optional
    messages to store now, usually the previous round's tool results and this
    model output; a runner that uses them implements
    ``build_unfinished_turn_messages``.
    """

    framework_run_state: str
    tool_calls: Sequence[DeferredToolCall]
    usage: AgentUsage
    new_messages: Sequence[FrameworkMessage] = ()
    model_call_metadata: ModelCallMetadata | None = None
    kind: Literal["tool_calls_requested"] = field(default="tool_calls_requested", init=False)


AgentTurnOutcome = TurnCompleted | ToolCallsRequested
"""What ``run_model_step`` returns: the turn's end, or tool calls to run."""


# --- tool execution outcomes -------------------------------------------------------


@dataclass(frozen=True)
class ToolExecutionResult:
    """A tool's output: recorded and shown to the model."""

    output: str


@dataclass(frozen=True)
class ToolInputRequested:
    """The tool asks the user a question before it takes any effect.

    The session raises a question interrupt ``<tool_call_id>-input-<n>`` and runs
    the same tool Step again with the answers in ``DeferredToolExecution.input_answers``
    and ``continuation`` in ``tool_call.input_continuation``.
    """

    question: str
    choices: tuple[str, ...] | None = None
    allows_free_text: bool = True
    continuation: str | None = None
    kind: Literal["tool_input_requested"] = field(default="tool_input_requested", init=False)


@dataclass(frozen=True)
class ToolTaskStarted:
    """The tool started remote work that the session polls (wire kind ``tool_task_started``).

    The tool Step records ``waiting_for_task`` with ``task_id`` and ends; ``PollToolTask``
    then calls the runner's ``poll_tool_task`` on a Timer every ``poll_interval_seconds``
    (rounded up to whole seconds, 1 second to 1 day). Save ``task_id`` with
    ``save_heartbeat_checkpoint`` before returning it, so a retried attempt resumes the
    same task instead of starting it again.
    """

    task_id: str
    poll_interval_seconds: float
    continuation: str | None = None
    """Stored as ``tool_call.input_continuation`` for the first poll."""
    kind: Literal["tool_task_started"] = field(default="tool_task_started", init=False)


@dataclass(frozen=True)
class ToolTaskPending:
    """The task still runs: poll again after ``poll_interval_seconds``.

    ``continuation`` is stored as ``tool_call.input_continuation`` for the next poll;
    ``None`` clears it.
    """

    poll_interval_seconds: float
    continuation: str | None = None
    kind: Literal["tool_task_pending"] = field(default="tool_task_pending", init=False)


QuestionResolution = Literal["answered", "declined", "deadline_passed"]
"""How a tool's question ended (``QuestionAnswer.resolution``)."""


@dataclass(frozen=True)
class QuestionAnswer:
    """How the user resolved a task's question; ``answer`` is set when ``answered``."""

    resolution: QuestionResolution
    answer: str | None = None


DeferredToolOutcome = ToolExecutionResult | ToolInputRequested | ToolTaskStarted
"""What ``execute_deferred_tool_call`` returns: a result, a question, or a started task."""
ToolTaskPollOutcome = ToolExecutionResult | ToolTaskPending | ToolInputRequested
"""What ``poll_tool_task`` returns: the task's result, still pending, or a question."""


class RunnerDefectError(ValueError):
    """The runner broke the contract; the session fails the Step attempt with this message."""

    __module__ = "dex_agents.runner"  # the public import path, as tracebacks show it


class ToolExecutionError(Exception):
    """A tool failure the model should see: the call records ``failed`` and is not retried."""

    __module__ = "dex_agents.runner"  # the public import path, as tracebacks show it

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- what the session gives the runner ---------------------------------------------


class AgentEventWriter(Protocol):
    """Writes live events to ``AgentEvents`` for one Step attempt.

    Writes are best effort and never block. Consecutive deltas of one type are
    merged for up to 100 ms or 1,024 characters. Writes after the Step handler
    returns are dropped.
    """

    @property
    def turn_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    def write_text_delta(self, text: str) -> None:
        """Model output text as it streams."""
        ...

    def write_reasoning_delta(self, text: str) -> None:
        """Provider-authored reasoning summary text as it streams."""
        ...

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None: ...

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: AgentToolCallStatus
    ) -> None: ...

    def write_event(self, type: str, payload: Mapping[str, JsonValue]) -> None:
        """Any event; give adapter-specific types a prefix such as ``"langgraph.node"``."""
        ...


class CancellationSignal(Protocol):
    """Tells a running Step attempt that Dex cancelled it (timeout, stop, or cancellation)."""

    def is_cancelled(self) -> bool: ...


@dataclass(frozen=True, kw_only=True)
class AgentTurnContext:
    """Everything ``run_model_step`` may use; built from committed state only.

    ``messages`` holds every stored message in sequence order, including this
    turn's user message. ``framework_run_state`` is the state from this turn's
    last ``ToolCallsRequested``, or ``None`` for the turn's first model call.
    ``tool_calls`` are this turn's records in deferral order, all final when
    ``run_model_step`` runs. ``deadline`` is when this attempt's method timeout
    ends. ``heartbeat()`` sends an extra heartbeat; the session already sends one
    every 20 seconds.
    """

    flow_id: str
    turn_id: str
    attempt: int
    messages: Sequence[AgentMessage]
    framework_run_state: str | None
    tool_calls: Sequence[AgentToolCall]
    events: AgentEventWriter
    cancellation: CancellationSignal
    deadline: datetime
    step_execution_id: str
    tool_policies: Mapping[str, ToolPolicy]
    default_tool_effect: ToolEffect
    heartbeat: Callable[[], Awaitable[None]]
    enabled_built_in_tools: tuple[str, ...] = ()
    """Names of built-in tools to offer the model; see ``enabled_builtin_tool_definitions``."""
    context_summary: ContextSummary | None = None
    """The summary of the messages before ``messages``, once the session compacted."""
    session_settings: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    """The settings this turn started with; ``{}`` when there are none."""
    interaction_mode: InteractionMode = InteractionMode.CHAT
    """``planning``: offer only ``write_todos``; ``executing``: the turn runs an approved plan."""
    plan: AgentPlan | None = None
    """The session's plan; show it with ``dex_agents.runner.build_plan_note``."""

    @property
    def is_resuming(self) -> bool:
        """Whether this model call continues the turn after tool calls."""
        return self.framework_run_state is not None

    def recorded_tool_call(self, tool_call_id: str) -> AgentToolCall | None:
        """This turn's record of ``tool_call_id``, or ``None``."""
        for record in self.tool_calls:
            if record.tool_call_id == tool_call_id:
                return record
        return None

    def resolve_tool_policy(
        self, tool_name: str, framework_effect: ToolEffect | str | None = None
    ) -> ResolvedToolPolicy:
        """The policy of ``tool_name``: session policy, then ``framework_effect``, then default.

        ``framework_effect`` may be a ``ToolEffect`` or its text (``"read"``); other text
        raises ``ValueError``.
        """
        return resolve_tool_policy(
            tool_name, framework_effect, self.tool_policies, self.default_tool_effect
        )


@dataclass(frozen=True, kw_only=True)
class DeferredToolExecution:
    """Everything ``execute_deferred_tool_call`` may use.

    ``idempotency_key`` is ``<flow_id>/<turn_id>/<tool_call_id>``, the same on
    every attempt: pass it to the remote system so a retried write is dropped.
    ``heartbeat_checkpoint`` is the text an earlier attempt saved with
    ``save_heartbeat_checkpoint``, or ``None``.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    cancellation: CancellationSignal
    deadline: datetime
    heartbeat: Callable[[], Awaitable[None]]
    heartbeat_checkpoint: str | None
    save_heartbeat_checkpoint: Callable[[str], Awaitable[None]]
    input_answers: tuple[str, ...] = ()
    """Answers to this tool's own questions (``ToolInputRequested``), oldest first."""
    supports_tool_tasks: bool = False


@dataclass(frozen=True, kw_only=True)
class ToolTaskPoll:
    """Everything ``poll_tool_task`` may use; one poll per ``PollToolTask`` execution.

    ``tool_call.task_id`` is the task to read and ``tool_call.input_continuation`` what the
    last poll (or the answered question) left. ``pending_answer`` is the resolution of the
    task's question, given only on the first poll after it was resolved (and again to a
    retried attempt of that poll). A poll must only read the task, or deliver an answer
    idempotently: a crash repeats it.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    cancellation: CancellationSignal
    deadline: datetime
    pending_answer: QuestionAnswer | None = None


@dataclass(frozen=True, kw_only=True)
class ToolTaskCancellation:
    """What ``cancel_tool_task`` gets when ``cancel_turn`` abandons a started task.

    Stop the remote work best-effort and idempotently by ``tool_call.task_id``: a
    crash or a failed attempt calls it again.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int


@runtime_checkable
class SupportsToolTasks(Protocol):
    """A runner (or tool source) that polls and cancels the tasks its tools start."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the task once: its output, ``ToolTaskPending``, or a question for the user.

        Raise ``ToolExecutionError`` for a failure the model should see; any other error
        fails the poll attempt (3 attempts, then the call is recorded by its effect).
        """
        ...

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Stop the remote work best-effort; idempotent by ``tool_call.task_id``."""
        ...


# --- the runner --------------------------------------------------------------------


class AgentFrameworkRunner(Protocol):
    """What an adapter implements; pass it to ``create_agent_session_flow``."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """The framework's user message, role ``"user"``; synchronous, deterministic, pure."""
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make at most one model call and run no tool.

        Rebuild input from ``turn.messages[*].framework_item`` only. When
        ``turn.is_resuming``, restore from ``turn.framework_run_state`` and give
        each call of the previous response the result of its final record
        (``describe_tool_call_outcome``). Raise for an unexpected failure: the
        call reruns from the same committed state, up to 3 attempts.
        """
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call and return its output.

        Raise ``ToolExecutionError`` for a failure the model should see; anything
        else is unexpected and retried by effect.
        """
        ...


def supports_tool_task_polling(runner: object) -> bool:
    """Whether ``runner`` polls tool tasks, so its tools may return ``ToolTaskStarted``.

    A runner has ``poll_tool_task``; one that has the method but nothing to poll with
    (an adapter without ``tool_tasks``) sets ``polls_tool_tasks`` to ``False``.
    """
    if not callable(getattr(runner, "poll_tool_task", None)):
        return False
    return getattr(runner, "polls_tool_tasks", True) is not False


def supports_plan_mode(runner: object) -> bool:
    """Whether ``runner`` offers only ``write_todos`` in a planning turn."""
    return getattr(runner, "supports_plan_mode", False) is True


@runtime_checkable
class SupportsUnfinishedTurnMessages(Protocol):
    """Optional: a runner with incremental messages stores a failed turn's transcript."""

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Messages of the turn not stored yet, such as the results of its final records."""
        ...
