"""Context compaction: the policy, the optional runner methods, and their pure rules.

Before each model call ``RunModel`` asks the runner for ``estimate_input_tokens``.
At ``trigger_ratio`` of ``context_window_tokens`` it asks ``select_compaction_cutoff``
for the last message to summarize; past the current summary, the session moves to
``CompactContext``, which calls ``summarize_context`` once and stores the
``ContextSummary``. From then on the runner gets the messages after the summary in
``turn.messages`` and the summary in ``turn.context_summary``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from dex_agents._contract import (
    AgentEventWriter,
    AgentTurnContext,
    CancellationSignal,
    ModelCallMetadata,
    RunnerDefectError,
)
from dex_agents._values import (
    AgentMessage,
    AgentState,
    AgentStatus,
    AgentUsage,
    ContextSummary,
    add_agent_usage,
    to_wire,
)

__all__ = [
    "DEFAULT_RETAINED_RATIO",
    "DEFAULT_TRIGGER_RATIO",
    "CompactionPolicy",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "SupportsCompaction",
    "check_compaction_runner",
    "compaction_cutoff_is_new",
    "record_summary",
    "start_compaction",
]

DEFAULT_TRIGGER_RATIO = 0.85
DEFAULT_RETAINED_RATIO = 0.3


@dataclass(frozen=True, kw_only=True)
class CompactionPolicy:
    """When the session summarizes earlier messages.

    Attributes:
        context_window_tokens: The model's context window, in tokens.
        trigger_ratio: Compact when the estimated input reaches this share of the window.
        retained_ratio: Share of the window the newest, unsummarized messages may keep.
    """

    context_window_tokens: int
    trigger_ratio: float = DEFAULT_TRIGGER_RATIO
    retained_ratio: float = DEFAULT_RETAINED_RATIO

    def __post_init__(self) -> None:
        tokens = self.context_window_tokens
        if type(tokens) is not int or tokens < 1:
            raise ValueError(f"context_window_tokens must be a positive integer, got {tokens!r}")
        for name in ("trigger_ratio", "retained_ratio"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        if self.retained_ratio >= self.trigger_ratio:
            raise ValueError("retained_ratio must be below trigger_ratio")

    @property
    def trigger_tokens(self) -> int:
        """Estimated input tokens at which ``RunModel`` compacts."""
        return int(self.context_window_tokens * self.trigger_ratio)

    @property
    def retained_token_budget(self) -> int:
        """Tokens the messages after the new summary may keep."""
        return int(self.context_window_tokens * self.retained_ratio)


@dataclass(frozen=True, kw_only=True)
class ContextSummaryRequest:
    """What ``summarize_context`` gets: the messages to fold into a new summary.

    ``messages`` are the stored messages after ``previous_summary`` through
    ``through_sequence``. ``input_token_budget`` is the policy's
    ``context_window_tokens``: keep the summary request within it.
    """

    flow_id: str
    turn_id: str
    attempt: int
    messages: Sequence[AgentMessage]
    previous_summary: ContextSummary | None
    through_sequence: int
    input_token_budget: int
    session_settings: Mapping[str, Any]
    events: AgentEventWriter
    cancellation: CancellationSignal
    deadline: datetime
    step_execution_id: str
    heartbeat: Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ContextSummaryResult:
    """What ``summarize_context`` returns: the summary text and the call's usage."""

    summary: str
    usage: AgentUsage = field(default_factory=AgentUsage)
    model_call_metadata: ModelCallMetadata | None = None


@runtime_checkable
class SupportsCompaction(Protocol):
    """The three optional runner methods a compaction policy needs."""

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Tokens of the model input this turn's next model call would send."""
        ...

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """The last sequence to summarize, keeping at most ``retained_token_budget``
        tokens after it, or ``None`` when no cut fits."""
        ...

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One model call that summarizes ``request.messages`` after the previous summary."""
        ...


def check_compaction_runner(runner: object) -> None:
    """Raise ``TypeError`` when a compaction policy meets a runner without the methods."""
    missing = [
        name
        for name in ("estimate_input_tokens", "select_compaction_cutoff", "summarize_context")
        if not callable(getattr(runner, name, None))
    ]
    if missing:
        raise TypeError(
            f"the compaction option needs a runner with {', '.join(missing)}; "
            f"{type(runner).__name__} does not implement them"
        )


def compaction_cutoff_is_new(
    cutoff: object, *, summary: ContextSummary | None, message_count: int
) -> bool:
    """Whether ``cutoff`` summarizes something new; a cutoff past the messages is a defect."""
    if cutoff is None:
        return False
    if type(cutoff) is not int:
        raise RunnerDefectError(
            f"runner defect: select_compaction_cutoff must return an int or None, got {cutoff!r}"
        )
    if cutoff > message_count:
        raise RunnerDefectError(
            f"runner defect: select_compaction_cutoff returned {cutoff}, "
            f"past the last stored message {message_count}"
        )
    return cutoff > (summary.last_sequence if summary is not None else 0)


def start_compaction(state: AgentState) -> AgentState:
    """The state while ``CompactContext`` runs."""
    return replace(state, status=AgentStatus.COMPACTING_CONTEXT)


def record_summary(
    state: AgentState,
    previous: ContextSummary | None,
    result: object,
    *,
    through_sequence: int,
    session_usage: AgentUsage,
) -> tuple[ContextSummary, AgentState, AgentUsage, list[tuple[str, dict[str, Any]]]]:
    """The new summary, state, session usage and events of a finished ``CompactContext``."""
    if not isinstance(result, ContextSummaryResult):
        raise RunnerDefectError(
            "runner defect: summarize_context must return a ContextSummaryResult, "
            f"got {type(result).__name__}"
        )
    if not isinstance(result.summary, str) or not result.summary.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError("runner defect: summarize_context returned an empty summary")
    if not isinstance(result.usage, AgentUsage):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError("runner defect: ContextSummaryResult.usage must be an AgentUsage")
    generation = (previous.generation if previous is not None else 0) + 1
    summary = ContextSummary(
        generation=generation, last_sequence=through_sequence, summary=result.summary
    )
    total = add_agent_usage(session_usage, result.usage)
    events: list[tuple[str, dict[str, Any]]] = [
        ("usage_recorded", {"recorded": to_wire(result.usage), "session": to_wire(total)}),
        ("compaction_finished", {"generation": generation, "through_sequence": through_sequence}),
    ]
    return summary, replace(state, status=AgentStatus.RUNNING_MODEL), total, events
