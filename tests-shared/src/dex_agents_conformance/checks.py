"""Small readers of session facts shared by the scenarios."""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents.values import AgentEvent, AgentMessage, AgentSnapshot
from dex_agents_conformance.diagnosis import defect_rule
from dex_agents_conformance.rules import ContractRule, checking


def final_answer(snapshot: AgentSnapshot) -> str:
    """Text of the last stored assistant message."""
    for message in reversed(snapshot.messages):
        if message.role == "assistant" and message.text:
            return message.text
    raise AssertionError(f"no assistant answer in {[m.role for m in snapshot.messages]}")


def assert_sequences_without_gaps(messages: Sequence[AgentMessage]) -> None:
    sequences = [message.sequence for message in messages]
    assert sequences == list(range(1, len(sequences) + 1)), sequences


def finished_statuses(events: Sequence[AgentEvent]) -> dict[str, str]:
    """Final status per tool call ID, from ``tool_call_finished`` events."""
    statuses: dict[str, str] = {}
    for event in events:
        if event.type == "tool_call_finished":
            payload = event.payload_data()
            statuses[payload["tool_call_id"]] = payload["status"]
    return statuses


def event_types(events: Sequence[AgentEvent], turn_id: str) -> list[str]:
    return [event.type for event in events if event.turn_id == turn_id]


def assert_turn_succeeded(snapshot: AgentSnapshot) -> None:
    """The latest turn ended without a turn error; a runner defect names the rule it breaks.

    The failure's notes (added by the harness) carry the failed Step attempts and
    the Worker logs' tracebacks.
    """
    state = snapshot.state
    error = state.last_turn_error if state is not None else None
    if error is None:
        return
    rule = defect_rule(error) or ContractRule.MODEL_FAILURES
    with checking(rule):
        raise AssertionError(f"the turn failed: {error}")
