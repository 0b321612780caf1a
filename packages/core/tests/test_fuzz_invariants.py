"""The fault runs' invariant checks can fail: each broken session or tool log below is
reported, and the healthy one is not (the runs themselves only ever show zero)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dex_agents import AgentMessage, AgentSnapshot, AgentStatus
from dex_agents.testing import TOOL_RUNS_LOG, InvocationLog
from dex_agents.testing._fuzz_sessions import CALLS, FuzzRunner, FuzzSessions
from dex_agents.testing.fault_injection import FaultReport
from dex_agents.values import AgentState

SESSION = "faults-1-stepwise-0"


def turn_messages(turn: int, text: str, first_sequence: int) -> list[AgentMessage]:
    """A complete turn as a session stores it: the user message, three calls, three
    results and the answer."""
    turn_id = f"turn-{turn}"
    messages = [AgentMessage(first_sequence, turn_id, "user", "{}", text=text)]
    for name, _ in CALLS:
        call_id = f"t{turn}-{name}"
        messages.append(
            AgentMessage(0, turn_id, "assistant", "{}", tool_call_id=call_id, tool_name=name)
        )
        messages.append(AgentMessage(0, turn_id, "tool", "{}", tool_call_id=call_id))
    messages.append(AgentMessage(0, turn_id, "assistant", "{}", text="done"))
    return [replace(m, sequence=first_sequence + n) for n, m in enumerate(messages)]


def healthy() -> list[AgentMessage]:
    return turn_messages(1, "message 1", 1) + turn_messages(2, "message 2", 9)


@pytest.fixture
def sessions(tmp_path: Path) -> FuzzSessions:
    runner = FuzzRunner.prepare("stepwise", tmp_path, "InvariantCheck")
    checked = FuzzSessions([runner], {"stepwise": [SESSION]})
    sent = checked.sent[SESSION]
    sent.texts += ["message 1", "message 2"]
    sent.confirmed |= {"message 1", "message 2"}
    checked.last_messages[SESSION] = "message 2"
    return checked


def check(
    sessions: FuzzSessions,
    messages: list[AgentMessage],
    state: AgentState | None = None,
) -> list[str]:
    report = FaultReport(seed=1, sessions=1, runners=("stepwise",))
    snapshot = AgentSnapshot(state=state or AgentState(), messages=tuple(messages))
    sessions._check_session("stepwise", SESSION, snapshot, messages, report)  # pyright: ignore[reportPrivateUsage]
    sessions._check_tool_runs(sessions.runners[0], report)  # pyright: ignore[reportPrivateUsage]
    return report.violations


def test_a_healthy_session_passes(sessions: FuzzSessions) -> None:
    assert check(sessions, healthy()) == []


def test_a_user_message_stored_twice_is_a_violation(sessions: FuzzSessions) -> None:
    messages = healthy()
    twice = turn_messages(3, "message 2", 17)
    assert "do not match" in " ".join(check(sessions, messages + twice))


def test_user_messages_out_of_order_are_a_violation(sessions: FuzzSessions) -> None:
    swapped = turn_messages(1, "message 2", 1) + turn_messages(2, "message 1", 9)
    assert "do not match" in " ".join(check(sessions, swapped))


def test_an_accepted_message_that_is_missing_is_a_violation(sessions: FuzzSessions) -> None:
    violations = check(sessions, turn_messages(1, "message 1", 1))
    assert any("do not match" in v for v in violations)
    assert any("no turn completed after the faults" in v for v in violations)


def test_a_call_without_its_result_is_a_violation(sessions: FuzzSessions) -> None:
    messages = [
        m for m in healthy() if not (m.role == "tool" and m.tool_call_id == "t2-charge_card")
    ]
    violations = " ".join(check(sessions, messages))
    assert "tool calls and results differ" in violations
    assert "answered after 2 tool results" in violations


def test_a_session_left_mid_turn_is_a_violation(sessions: FuzzSessions) -> None:
    running = AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-3")
    assert "ended unsettled" in " ".join(check(sessions, healthy(), running))


def test_a_non_idempotent_write_run_twice_is_a_violation(sessions: FuzzSessions) -> None:
    log = InvocationLog(sessions.runners[0].state / TOOL_RUNS_LOG)
    key = f"{SESSION}/turn-1/t1-charge_card"
    log.record("reserve_stock", idempotency_key=f"{SESSION}/turn-1/t1-reserve_stock")
    log.record("reserve_stock", idempotency_key=f"{SESSION}/turn-1/t1-reserve_stock")
    assert check(sessions, healthy()) == []  # an idempotent write may repeat its key
    log.record("charge_card", idempotency_key=key)
    log.record("charge_card", idempotency_key=key)
    assert check(sessions, healthy()) == [f"stepwise: charge_card ran 2 times for {key}"]


def test_a_write_with_another_sessions_key_is_a_violation(sessions: FuzzSessions) -> None:
    log = InvocationLog(sessions.runners[0].state / TOOL_RUNS_LOG)
    log.record("charge_card", idempotency_key="someone-else/turn-1/t1-charge_card")
    assert "foreign key" in " ".join(check(sessions, healthy()))
