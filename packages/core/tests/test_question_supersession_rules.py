"""Pure rule of ``question_supersedes_later_calls``, without an engine."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from dex_agents import AgentToolCallStatus, AgentUsage, InteractionMode, ToolEffect
from dex_agents.runner import (
    PLANNING_TURN_TOOL_REJECTED,
    TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT,
    DeferredToolCall,
    ResolvedToolPolicy,
    ToolCallsRequested,
)
from dex_agents.session._changes import SessionChanges
from dex_agents.session._question_supersession import (
    SUPERSEDED_BY_USER_INPUT,
    raises_question,
    supersede_call,
)
from dex_agents.session._routing import ToolStepKind, ToolStepMove, TurnRouting
from dex_agents.session._turn_rules import request_tool_calls, start_turn
from dex_agents.values import AgentState, FrameworkMessage

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
BUILT_IN = ("ask_user", "durable_wait", "write_todos")
READ = ResolvedToolPolicy(ToolEffect.READ, False)
GUARDED = ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)

# A response with a tool, a question that asks nothing, a question, and four later calls.
CALLS = (
    ("before", "lookup", "{}", READ),
    ("blank", "ask_user", '{"question": " "}', READ),
    ("q1", "ask_user", '{"question": "Which date?"}', READ),
    ("w1", "durable_wait", '{"duration_seconds": 30, "reason": "later"}', READ),
    ("q2", "ask_user", '{"question": "And the time?"}', READ),
    ("todos", "write_todos", '{"todos": []}', READ),
    ("send", "send_email", "{}", GUARDED),
)
LATER = ["w1", "q2", "todos", "send"]


def _request(
    *, supersedes: bool, mode: InteractionMode = InteractionMode.CHAT
) -> tuple[SessionChanges, TurnRouting]:
    start, _ = start_turn(AgentState(), FrameworkMessage(role="user", framework_item="{}"))
    assert start.state is not None
    return request_tool_calls(
        replace(start.state, interaction_mode=mode),
        ToolCallsRequested(
            framework_run_state="s",
            tool_calls=[DeferredToolCall(*call) for call in CALLS],
            usage=AgentUsage(),
        ),
        session_usage=AgentUsage(),
        records=[],
        pending_interrupts=(),
        now=NOW,
        interrupt_deadline=None,
        built_in_tools=BUILT_IN,
        question_supersedes_later_calls=supersedes,
    )


def test_calls_after_the_first_question_are_final_without_running() -> None:
    changes, routing = _request(supersedes=True)
    assert [(m.tool_call_id, m.kind) for m in routing.tool_steps] == [
        ("before", ToolStepKind.CALL_TOOL),
        ("q1", ToolStepKind.AWAIT_QUESTION),
    ]
    assert routing.resume_count == len(CALLS)
    records = {r.tool_call_id: r for r in changes.written_records}
    assert records["blank"].status is AgentToolCallStatus.FAILED
    assert records["q1"].status is AgentToolCallStatus.AWAITING_ANSWER
    for call_id in LATER:
        record = records[call_id]
        assert record.status is AgentToolCallStatus.REJECTED
        assert record.rejection_message == TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
        assert record.cancellation_reason == SUPERSEDED_BY_USER_INPUT
    assert changes.completed_tool_calls == ["blank", *LATER]
    assert changes.pending_interrupts is not None
    assert [i.interrupt_id for i in changes.pending_interrupts] == ["q1"]
    types = [e.type for e in changes.events]
    assert "timer_started" not in types
    assert types.count("interrupt_raised") == 1
    assert changes.plan is None  # the superseded write_todos wrote no plan


def test_without_the_option_every_call_of_the_response_runs() -> None:
    changes, routing = _request(supersedes=False)
    assert [(m.tool_call_id, m.kind) for m in routing.tool_steps] == [
        ("before", ToolStepKind.CALL_TOOL),
        ("q1", ToolStepKind.AWAIT_QUESTION),
        ("w1", ToolStepKind.AWAIT_TIMER),
        ("q2", ToolStepKind.AWAIT_QUESTION),
        ("send", ToolStepKind.AWAIT_APPROVAL),
    ]
    assert changes.completed_tool_calls == ["blank", "todos"]
    assert changes.plan is not None
    assert not any(r.cancellation_reason for r in changes.written_records)


def test_a_planning_turn_rejects_the_question_so_it_supersedes_nothing() -> None:
    changes, routing = _request(supersedes=True, mode=InteractionMode.PLANNING)
    assert [m.tool_call_id for m in routing.tool_steps] == []
    records = {r.tool_call_id: r for r in changes.written_records}
    for call_id in ("before", "blank", "q1", "w1", "q2", "send"):
        assert records[call_id].rejection_message == PLANNING_TURN_TOOL_REJECTED
        assert records[call_id].cancellation_reason is None
    assert records["todos"].status is AgentToolCallStatus.SUCCEEDED


def test_only_a_raised_question_supersedes() -> None:
    assert raises_question(ToolStepMove("q", ToolStepKind.AWAIT_QUESTION))
    assert not raises_question(ToolStepMove("w", ToolStepKind.AWAIT_TIMER))
    assert not raises_question(None)


def test_a_final_call_is_not_superseded_again() -> None:
    changes, _ = _request(supersedes=True)
    done = next(r for r in changes.written_records if r.tool_call_id == "w1")
    assert supersede_call(done).written_records == []
