"""Test support for a runner's compaction methods, driven without a session."""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents._compaction import ContextSummaryRequest
from dex_agents._contract import AgentTurnContext
from dex_agents._values import AgentMessage, ContextSummary

__all__ = ["summary_request"]


def summary_request(
    turn: AgentTurnContext,
    messages: Sequence[AgentMessage] | None = None,
    *,
    previous_summary: ContextSummary | None = None,
    input_token_budget: int = 100_000,
) -> ContextSummaryRequest:
    """The ``ContextSummaryRequest`` that ``CompactContext`` would build in ``turn`` for
    ``messages`` (default: all of the turn's messages)."""
    summarized = tuple(turn.messages if messages is None else messages)
    return ContextSummaryRequest(
        flow_id=turn.flow_id,
        turn_id=turn.turn_id,
        attempt=turn.attempt,
        messages=summarized,
        previous_summary=previous_summary,
        through_sequence=summarized[-1].sequence,
        input_token_budget=input_token_budget,
        session_settings=turn.session_settings,
        events=turn.events,
        cancellation=turn.cancellation,
        deadline=turn.deadline,
        step_execution_id=turn.step_execution_id,
        heartbeat=turn.heartbeat,
    )
