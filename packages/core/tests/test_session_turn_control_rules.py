"""Pure rules of steering, cancellation and plans, without an engine."""

from __future__ import annotations

import json

import pytest

from dex_agents._plans import (
    InvalidTodos,
    interaction_mode_for_turn,
    next_plan,
    parse_todos,
    write_todos_output,
)
from dex_agents._texts import (
    TURN_CANCELLED_NOTE_HEADER,
    TURN_STEERED_NOTE_HEADER,
    WRITE_TODOS_CALLED_TWICE,
    build_turn_control_note,
)
from dex_agents.runner import (
    PLANNING_TURN_TOOL_REJECTED,
    TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT,
    build_plan_note,
)
from dex_agents.session._plan_rules import (
    accepts_plan_execution,
    activate_plan,
    is_current_plan_execution,
    settle_model_call,
)
from dex_agents.session._turn_control_rules import (
    TurnControl,
    end_controlled_turn,
    finish_turn_cancellation,
    start_turn_with_messages,
    steer_wake,
    turn_control,
)
from dex_agents.values import (
    AgentInterrupt,
    AgentPlan,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    FrameworkMessage,
    InteractionMode,
    InterruptKind,
    PlanExecutionRequest,
    PlanTask,
    ToolEffect,
    TurnCancellationRequest,
)


def _record(call_id: str, status: AgentToolCallStatus, name: str = "charge") -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name=name,
        arguments="{}",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
        deferral_order=0,
    )


def _approval(call_id: str, turn_id: str = "turn-1") -> AgentInterrupt:
    return AgentInterrupt(
        interrupt_id=call_id,
        kind=InterruptKind.APPROVAL,
        turn_id=turn_id,
        tool_call_id=call_id,
        tool_name="charge",
        arguments="{}",
    )


def _user(text: str) -> FrameworkMessage:
    return FrameworkMessage(role="user", framework_item=text, text=text)


ACTIVE = AgentState(
    status=AgentStatus.RUNNING_TOOLS,
    turn_count=1,
    active_turn_id="turn-1",
    message_count=2,
    accepts_turn_control=True,
)


def test_turn_control_reads_steered_messages_and_the_request_of_this_turn() -> None:
    other = TurnCancellationRequest(turn_id="turn-0", requested_at="2026-01-01T00:00:00.000Z")
    mine = TurnCancellationRequest(turn_id="turn-1", requested_at="2026-01-01T00:00:00.000Z")
    assert turn_control("turn-1", steered_message_count=0, cancellation=other).reason is None
    assert turn_control("turn-1", steered_message_count=2, cancellation=other).reason == "steered"
    assert turn_control("turn-1", steered_message_count=2, cancellation=mine).reason == (
        "turn_cancelled"
    )
    assert turn_control(None, steered_message_count=2, cancellation=mine) == TurnControl()


def test_a_steer_wake_drops_the_turns_interrupts_and_ends_every_wait() -> None:
    records = [
        _record("a", AgentToolCallStatus.AWAITING_APPROVAL),
        _record("b", AgentToolCallStatus.APPROVED),
        _record("c", AgentToolCallStatus.WAITING_FOR_TIMER),
    ]
    pending = (_approval("a"), _approval("z", turn_id="turn-0"))
    changes = steer_wake("turn-1", records, pending, "steered")
    assert changes.pending_interrupts == (_approval("z", turn_id="turn-0"),)
    assert changes.tool_call_cancellations == {"a": "steered", "c": "steered"}
    [event] = changes.events
    assert event.type == "interrupt_resolved"
    assert event.payload["cancellation_reason"] == "steered"


def test_finish_turn_cancellation_rejects_waiting_calls_while_tools_run() -> None:
    records = [
        _record("a", AgentToolCallStatus.AWAITING_APPROVAL),
        _record("b", AgentToolCallStatus.APPROVED),
    ]
    outcome = finish_turn_cancellation(ACTIVE, "turn-1", records, (_approval("a"),))
    assert not outcome.apply_turn_control
    [rejected] = outcome.changes.written_records
    assert rejected.status is AgentToolCallStatus.REJECTED
    assert rejected.cancellation_reason == "turn_cancelled"
    assert rejected.rejection_message == TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT
    assert outcome.changes.completed_tool_calls == ["a"]
    assert outcome.changes.pending_interrupts == ()


def test_finish_turn_cancellation_ends_a_turn_whose_model_call_was_cancelled() -> None:
    running = AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-1", turn_count=1)
    assert finish_turn_cancellation(running, "turn-1", [], ()).apply_turn_control
    # Another turn, or none: nothing to do.
    assert not finish_turn_cancellation(running, "turn-2", [], ()).apply_turn_control
    assert not finish_turn_cancellation(None, "turn-1", [], ()).apply_turn_control


def test_end_controlled_turn_stores_the_closing_messages_and_writes_its_event() -> None:
    records = [_record("a", AgentToolCallStatus.REJECTED)]
    note = _user("note")
    steered = end_controlled_turn(
        ACTIVE,
        TurnControl(steered=True),
        steered_message_count=2,
        records=records,
        pending_interrupts=(_approval("a"),),
        reply_sequence=None,
        stored_messages=[],
        closing_messages=[note],
    )
    assert steered.state is not None
    assert steered.state.active_turn_id is None
    assert steered.state.message_count == 3
    assert [m.sequence for m in steered.appended_messages] == [3]
    assert steered.deleted_record_ids == ["a"]
    assert steered.pending_interrupts == ()
    [event] = steered.events
    assert (event.type, event.payload["steered_message_count"]) == ("turn_steered", 2)
    cancelled = end_controlled_turn(
        ACTIVE,
        TurnControl(steered=True, cancelled=True),
        steered_message_count=0,
        records=[],
        pending_interrupts=(),
        reply_sequence=None,
        stored_messages=[],
        closing_messages=[],
    )
    assert [e.type for e in cancelled.events] == ["turn_cancelled"]
    with pytest.raises(ValueError, match="steered or cancelled"):
        end_controlled_turn(
            ACTIVE,
            TurnControl(),
            steered_message_count=0,
            records=[],
            pending_interrupts=(),
            reply_sequence=None,
            stored_messages=[],
            closing_messages=[],
        )


def test_a_steered_turn_starts_with_every_steered_message_in_order() -> None:
    idle = AgentState(turn_count=1, message_count=3)
    changes, turn_id = start_turn_with_messages(
        idle, [_user("one"), _user("two")], InteractionMode.PLANNING
    )
    assert turn_id == "turn-2"
    assert [(m.sequence, m.text) for m in changes.appended_messages] == [(4, "one"), (5, "two")]
    assert changes.state is not None
    assert changes.state.message_count == 5
    assert changes.state.interaction_mode is InteractionMode.PLANNING
    assert changes.state.accepts_turn_control
    assert changes.reply_sequence is not None
    assert changes.reply_sequence.sequence == 6


def test_the_turn_control_note_lists_the_calls_that_ran_under_its_header() -> None:
    records = [_record("a", AgentToolCallStatus.SUCCEEDED)]
    steered = build_turn_control_note(cancelled=False, records=records)
    cancelled = build_turn_control_note(cancelled=True, records=records)
    assert steered is not None
    assert steered.startswith(TURN_STEERED_NOTE_HEADER)
    assert cancelled is not None
    assert cancelled.startswith(TURN_CANCELLED_NOTE_HEADER)
    assert build_turn_control_note(cancelled=True, records=[]) is None


# --- plans -------------------------------------------------------------------------


def _todos(*tasks: tuple[str, str]) -> str:
    return json.dumps({"todos": [{"content": c, "status": s} for c, s in tasks]})


def test_parse_todos_checks_every_task() -> None:
    assert parse_todos(_todos(("a", "pending"))) == (PlanTask(content="a", status="pending"),)
    assert parse_todos('{"todos": []}') == ()
    for bad, reason in [
        ("[]", "JSON object"),
        ('{"todos": {}}', "must be a list"),
        ('{"todos": [], "x": 1}', "unexpected argument"),
        (_todos((" ", "pending")), "non-blank"),
        (_todos(("a", "done")), "status must be one of"),
    ]:
        with pytest.raises(InvalidTodos, match=reason):
            parse_todos(bad)


def test_next_plan_sets_revision_and_status() -> None:
    pending = (PlanTask(content="a", status="pending"),)
    done = (PlanTask(content="a", status="completed"),)
    draft = next_plan(None, pending, InteractionMode.PLANNING)
    assert (draft.revision, draft.status) == (1, "draft")
    assert next_plan(draft, pending, InteractionMode.EXECUTING).status == "active"
    assert next_plan(draft, done, InteractionMode.CHAT).status == "completed"
    cleared = next_plan(draft, (), InteractionMode.CHAT)
    assert (cleared.revision, cleared.status) == (2, "cleared")
    assert write_todos_output(cleared) == '{"status":"cleared","revision":2}'
    assert write_todos_output(draft) == '{"status":"updated","revision":1,"task_count":1}'


def test_write_todos_settles_in_run_model_and_a_planning_turn_rejects_other_calls() -> None:
    call = _record("w", AgentToolCallStatus.APPROVED, name="write_todos")
    call = AgentToolCall(**{**call.__dict__, "arguments": _todos(("a", "pending"))})
    settled = settle_model_call(
        call,
        plan=None,
        mode=InteractionMode.PLANNING,
        built_in_tools=("write_todos",),
        write_todos_calls=1,
    )
    assert settled is not None
    assert settled.plan is not None
    assert settled.plan.status == "draft"
    assert [e.type for e in settled.changes.events] == ["tool_call_finished", "plan_updated"]
    twice = settle_model_call(
        call,
        plan=None,
        mode=InteractionMode.CHAT,
        built_in_tools=("write_todos",),
        write_todos_calls=2,
    )
    assert twice is not None
    assert twice.changes.written_records[0].error == WRITE_TODOS_CALLED_TWICE
    other = _record("o", AgentToolCallStatus.APPROVED)
    rejected = settle_model_call(
        other, plan=None, mode=InteractionMode.PLANNING, built_in_tools=(), write_todos_calls=0
    )
    assert rejected is not None
    assert rejected.changes.written_records[0].rejection_message == PLANNING_TURN_TOOL_REJECTED
    assert (
        settle_model_call(
            other, plan=None, mode=InteractionMode.CHAT, built_in_tools=(), write_todos_calls=0
        )
        is None
    )


def test_plan_execution_accepts_only_the_current_revision_while_idle() -> None:
    draft = AgentPlan(revision=2, status="draft", tasks=(PlanTask(content="a", status="pending"),))
    idle = AgentState()
    request = PlanExecutionRequest(revision=2)

    def accepts(**overrides: object) -> bool:
        values: dict[str, object] = {
            "state": idle,
            "plan": draft,
            "pending": None,
            "queued_count": 0,
            "steered_count": 0,
            "pending_interrupt_count": 0,
        }
        values.update(overrides)
        return accepts_plan_execution(request, **values)  # type: ignore[arg-type]

    assert accepts()
    assert not accepts(state=ACTIVE)
    assert not accepts(plan=AgentPlan(revision=3, status="draft"))
    assert not accepts(plan=AgentPlan(revision=2, status="completed"))
    assert not accepts(pending=request)
    assert accepts(pending=PlanExecutionRequest(revision=1))
    assert not accepts(queued_count=1)
    assert not accepts(steered_count=1)
    assert not accepts(pending_interrupt_count=1)
    assert is_current_plan_execution(request, draft)
    assert not is_current_plan_execution(PlanExecutionRequest(revision=1), draft)
    active = activate_plan(draft)
    assert active is not None
    assert active.status == "active"
    assert activate_plan(active) is None


def test_the_plan_note_and_the_mode_of_a_new_turn() -> None:
    draft = AgentPlan(revision=1, status="draft", tasks=(PlanTask(content="a", status="pending"),))
    assert interaction_mode_for_turn(False, None) is InteractionMode.CHAT
    assert interaction_mode_for_turn(True, None) is InteractionMode.PLANNING
    assert interaction_mode_for_turn(False, draft) is InteractionMode.PLANNING
    assert build_plan_note(None, InteractionMode.CHAT) is None
    planning = build_plan_note(None, "planning")
    assert planning is not None
    assert "write_todos" in planning
    note = build_plan_note(draft, InteractionMode.EXECUTING)
    assert note is not None
    assert "- [pending] a" in note
