"""Pure session rules, without an engine: turns, tool records, approvals, reads and texts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from dex import RecoveryErrorInfo

from dex_agents import (
    AgentMessage,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    InterruptKind,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.runner import (
    APPROVAL_DEADLINE_PASSED,
    DEFAULT_REJECTION_MESSAGE,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    DeferredToolCall,
    ResolvedToolPolicy,
    RunnerDefectError,
    ToolCallsRequested,
    TurnCompleted,
    build_turn_failure_note,
    describe_tool_call_outcome,
    resolve_tool_policy,
)
from dex_agents.session._approval_rules import (
    apply_approval_resolution,
    apply_approval_timer,
    approval_wait,
    decide_resolve_interrupt,
)
from dex_agents.session._read_rules import accepts_user_message, page_messages
from dex_agents.session._routing import ToolStepKind
from dex_agents.session._tool_rules import (
    finish_tool_call,
    idempotency_key,
    open_record_count,
    record_failure_route,
)
from dex_agents.session._turn_rules import (
    apply_model_outcome,
    fail_turn,
    start_turn,
)
from dex_agents.values import (
    AgentInterruptResolution,
    AgentState,
    AgentUserMessage,
    FrameworkMessage,
    ListAgentMessagesInput,
    ResolveInterruptInput,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
READ = ResolvedToolPolicy(ToolEffect.READ, False)
WRITE = ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)


def user(text: str) -> FrameworkMessage:
    return FrameworkMessage(role="user", framework_item=json.dumps({"text": text}), text=text)


def assistant(text: str) -> FrameworkMessage:
    return FrameworkMessage(role="assistant", framework_item=json.dumps({"a": text}), text=text)


def active_state() -> AgentState:
    changes, _ = start_turn(AgentState(), user("hello"))
    assert changes.state is not None
    return changes.state


def record(
    call_id: str = "c1",
    *,
    effect: ToolEffect = ToolEffect.READ,
    status: AgentToolCallStatus = AgentToolCallStatus.APPROVED,
    order: int = 0,
    **extra: object,
) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name="lookup",
        arguments='{"id":1}',
        effect=effect,
        requires_approval=False,
        status=status,
        deferral_order=order,
        **extra,  # type: ignore[arg-type]
    )


def outcome_of(state: AgentState, outcome: object, **overrides: object):
    arguments: dict[str, object] = {
        "session_usage": AgentUsage(),
        "records": [],
        "pending_interrupts": (),
        "reply_sequence": None,
        "stored_messages": [],
        "now": NOW,
        "interrupt_deadline": None,
    }
    arguments.update(overrides)
    return apply_model_outcome(state, outcome, **arguments)  # type: ignore[arg-type]


# --- turns --------------------------------------------------------------------------


def test_start_turn_numbers_the_turn_and_stores_the_user_message() -> None:
    state = AgentState(turn_count=2, message_count=7, last_turn_error="boom")
    changes, turn_id = start_turn(state, user("hi"))
    assert turn_id == "turn-3"
    assert changes.state == AgentState(
        status=AgentStatus.RUNNING_MODEL,
        turn_count=3,
        active_turn_id="turn-3",
        message_count=8,
        accepts_turn_control=True,
    )
    assert [(m.sequence, m.turn_id, m.text) for m in changes.appended_messages] == [
        (8, "turn-3", "hi")
    ]
    assert changes.reply_sequence is not None
    assert changes.reply_sequence.sequence == 9
    assert [(e.type, dict(e.payload)) for e in changes.events] == [
        ("turn_started", {"sequence": 8})
    ]


def test_start_turn_refuses_a_user_message_with_another_role() -> None:
    with pytest.raises(RunnerDefectError, match="role 'user'"):
        start_turn(AgentState(), assistant("hi"))


def test_completed_turn_stores_messages_and_counts_replies() -> None:
    state = active_state()
    start, _ = start_turn(AgentState(), user("hello"))
    outcome = TurnCompleted(
        new_messages=[assistant("a"), assistant("b")],
        usage=AgentUsage(model_calls=1, input_tokens=3),
    )
    changes, routing = outcome_of(
        state,
        outcome,
        session_usage=AgentUsage(model_calls=2, input_tokens=4),
        records=[record()],
        reply_sequence=start.reply_sequence,
    )
    assert routing.tool_steps == ()
    assert not routing.run_model
    assert changes.state is not None
    assert changes.state.active_turn_id is None
    assert changes.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert changes.state.message_count == 3
    assert [m.sequence for m in changes.appended_messages] == [2, 3]
    assert changes.deleted_record_ids == ["c1"]
    assert changes.framework_run_state_changed
    assert changes.framework_run_state is None
    assert changes.usage == AgentUsage(model_calls=3, input_tokens=7)
    types = [e.type for e in changes.events]
    assert types == ["usage_recorded", "turn_completed"]
    assert changes.events[-1].payload == {"message_count": 2}
    recorded = changes.events[0].payload
    assert recorded["recorded"]["model_calls"] == 1
    assert recorded["session"]["input_tokens"] == 7


def test_tool_calls_get_records_interrupts_and_steps_by_effect() -> None:
    state = active_state()
    outcome = ToolCallsRequested(
        framework_run_state="state-1",
        tool_calls=[
            DeferredToolCall("r1", "read_it", "{}", READ),
            DeferredToolCall("w1", "write_it", '{"x":1}', WRITE),
            DeferredToolCall(
                "i1", "put_it", "{}", ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)
            ),
            DeferredToolCall(
                "u1", "other", "{}", ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
            ),
        ],
        usage=AgentUsage(model_calls=1),
        new_messages=[assistant("calls")],
    )
    changes, routing = outcome_of(
        state,
        outcome,
        records=[record("old", status=AgentToolCallStatus.SUCCEEDED)],
        interrupt_deadline=timedelta(hours=1),
    )
    assert routing.resume_count == 4
    assert [(m.tool_call_id, m.kind) for m in routing.tool_steps] == [
        ("r1", ToolStepKind.CALL_TOOL),
        ("w1", ToolStepKind.AWAIT_APPROVAL),
        ("i1", ToolStepKind.CALL_TOOL),
        ("u1", ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL),
    ]
    assert [r.deferral_order for r in changes.written_records] == [1, 2, 3, 4]
    assert [r.status for r in changes.written_records] == [
        AgentToolCallStatus.APPROVED,
        AgentToolCallStatus.AWAITING_APPROVAL,
        AgentToolCallStatus.APPROVED,
        AgentToolCallStatus.APPROVED,
    ]
    assert changes.framework_run_state == "state-1"
    assert changes.state is not None
    assert changes.state.status is AgentStatus.RUNNING_TOOLS
    assert changes.state.message_count == 2
    assert changes.pending_interrupts is not None
    (interrupt,) = changes.pending_interrupts
    assert interrupt.interrupt_id == "w1"
    assert interrupt.kind is InterruptKind.APPROVAL
    assert interrupt.deadline == "2026-11-29T13:00:00.000Z"
    raised = [e for e in changes.events if e.type == "interrupt_raised"]
    assert raised[0].payload == {
        "interrupt_id": "w1",
        "kind": "approval",
        "tool_call_id": "w1",
        "tool_name": "write_it",
        "deadline": "2026-11-29T13:00:00.000Z",
        "question": None,
        "choices": None,
        "allows_free_text": None,
    }
    assert [e.type for e in changes.events].count("tool_call_deferred") == 4


@pytest.mark.parametrize(
    ("calls", "records", "message"),
    [
        ([DeferredToolCall("", "t", "{}", READ)], [], "empty tool call ID"),
        ([DeferredToolCall("a/b", "t", "{}", READ)], [], "contains '/'"),
        (
            [DeferredToolCall("a", "t", "{}", READ), DeferredToolCall("a", "t", "{}", READ)],
            [],
            "appears twice",
        ),
        (
            [DeferredToolCall("c1", "t", "{}", READ)],
            [record("c1", status=AgentToolCallStatus.SUCCEEDED)],
            "already has a record",
        ),
        ([], [], "tool_calls is empty"),
    ],
)
def test_runner_defects_fail_the_attempt_with_the_defect_named(calls, records, message) -> None:
    outcome = ToolCallsRequested(framework_run_state="s", tool_calls=calls, usage=AgentUsage())
    with pytest.raises(RunnerDefectError, match=message):
        outcome_of(active_state(), outcome, records=records)


def test_empty_run_state_and_wrong_outcome_are_defects() -> None:
    with pytest.raises(RunnerDefectError, match="framework_run_state"):
        outcome_of(
            active_state(),
            ToolCallsRequested("", [DeferredToolCall("a", "t", "{}", READ)], AgentUsage()),
        )
    with pytest.raises(RunnerDefectError, match="TurnCompleted or ToolCallsRequested"):
        outcome_of(active_state(), "done")
    with pytest.raises(RunnerDefectError, match="FrameworkMessage"):
        outcome_of(active_state(), TurnCompleted(new_messages=["text"], usage=AgentUsage()))  # type: ignore[list-item]


def test_failed_turn_stores_unfinished_messages_then_the_note() -> None:
    state = active_state()
    done = record("c1", status=AgentToolCallStatus.SUCCEEDED, output="sent")
    changes, routing = fail_turn(
        state,
        error="model unavailable",
        records=[done],
        pending_interrupts=(),
        unfinished_messages=[assistant("partial")],
        failure_note=user("note"),
    )
    assert not routing.run_model
    assert routing.tool_steps == ()
    assert [m.text for m in changes.appended_messages] == ["partial", "note"]
    assert changes.state is not None
    assert changes.state.last_turn_error == "model unavailable"
    assert changes.state.active_turn_id is None
    assert changes.deleted_record_ids == ["c1"]
    assert [(e.type, dict(e.payload)) for e in changes.events] == [
        ("turn_failed", {"error": "model unavailable"})
    ]


# --- texts ---------------------------------------------------------------------------


def test_turn_failure_note_lists_final_calls() -> None:
    sent = AgentToolCall(
        tool_call_id="a",
        turn_id="turn-1",
        tool_name="send_email",
        arguments='{"to":"ops"}',
        effect=ToolEffect.IDEMPOTENT_WRITE,
        requires_approval=False,
        status=AgentToolCallStatus.SUCCEEDED,
        deferral_order=0,
        output="email sent",
    )
    charged = AgentToolCall(
        tool_call_id="b",
        turn_id="turn-1",
        tool_name="charge_card",
        arguments='{"amount":5}',
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=AgentToolCallStatus.OUTCOME_UNKNOWN,
        deferral_order=1,
        error="worker died",
    )
    note = build_turn_failure_note([sent, charged, record("open")])
    assert note == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        '- send_email {"to":"ops"} -> succeeded: email sent\n'
        f'- charge_card {{"amount":5}} -> outcome_unknown: {OUTCOME_UNKNOWN_TOOL_RESULT}\n'
        "Do not repeat these tool calls unless the user asks again."
    )
    assert OUTCOME_UNKNOWN_TOOL_RESULT.startswith("The tool call's outcome is unknown: ")
    assert build_turn_failure_note([record()]) is None


def test_describe_tool_call_outcome_by_status() -> None:
    assert (
        describe_tool_call_outcome(record(status=AgentToolCallStatus.SUCCEEDED, output="ok"))
        == "ok"
    )
    assert (
        describe_tool_call_outcome(record(status=AgentToolCallStatus.FAILED, error="bad")) == "bad"
    )
    assert (
        describe_tool_call_outcome(record(status=AgentToolCallStatus.REJECTED))
        == DEFAULT_REJECTION_MESSAGE
    )
    assert (
        describe_tool_call_outcome(
            record(status=AgentToolCallStatus.REJECTED, rejection_message="no")
        )
        == "no"
    )
    assert (
        describe_tool_call_outcome(record(status=AgentToolCallStatus.OUTCOME_UNKNOWN))
        == OUTCOME_UNKNOWN_TOOL_RESULT
    )
    with pytest.raises(ValueError, match="not final"):
        describe_tool_call_outcome(record(status=AgentToolCallStatus.APPROVED))


# --- policies and tool records ---------------------------------------------------------


def test_tool_policy_precedence_and_default_approval() -> None:
    policies = {
        "pay": ToolPolicy(ToolEffect.READ, requires_approval=True),
        "get": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    }
    assert resolve_tool_policy(
        "pay", ToolEffect.NON_IDEMPOTENT_WRITE, policies, ToolEffect.UNCLASSIFIED
    ) == ResolvedToolPolicy(ToolEffect.READ, True)
    assert resolve_tool_policy(
        "get", None, policies, ToolEffect.UNCLASSIFIED
    ) == ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)
    assert resolve_tool_policy(
        "x", ToolEffect.READ, policies, ToolEffect.UNCLASSIFIED
    ) == ResolvedToolPolicy(ToolEffect.READ, False)
    assert resolve_tool_policy("x", None, policies, ToolEffect.UNCLASSIFIED) == ResolvedToolPolicy(
        ToolEffect.UNCLASSIFIED, True
    )


def test_finishing_a_call_publishes_once() -> None:
    changes = finish_tool_call(record(), AgentToolCallStatus.SUCCEEDED, output="x")
    assert changes.completed_tool_calls == ["c1"]
    assert changes.written_records[0].status is AgentToolCallStatus.SUCCEEDED
    assert changes.events[0].payload == {
        "tool_call_id": "c1",
        "tool_name": "lookup",
        "status": "succeeded",
    }
    again = finish_tool_call(changes.written_records[0], AgentToolCallStatus.FAILED, error="late")
    assert again.completed_tool_calls == []
    assert again.written_records == []


def test_failure_routes_record_by_effect() -> None:
    error = RecoveryErrorInfo(detail="worker disconnected", error_type="WorkerLost")
    read = record_failure_route(record(effect=ToolEffect.READ), error, outcome_unknown_always=False)
    assert read.written_records[0].status is AgentToolCallStatus.FAILED
    assert read.written_records[0].error == "worker disconnected"
    write = record_failure_route(
        record(effect=ToolEffect.IDEMPOTENT_WRITE), error, outcome_unknown_always=False
    )
    assert write.written_records[0].status is AgentToolCallStatus.OUTCOME_UNKNOWN
    single = record_failure_route(
        record(effect=ToolEffect.READ), error, outcome_unknown_always=True
    )
    assert single.written_records[0].status is AgentToolCallStatus.OUTCOME_UNKNOWN


def test_a_tool_step_that_never_started_records_failed_safe_to_call_again() -> None:
    from dex_agents.runner import TOOL_CALL_NOT_RUN_ERROR_PREFIX

    error = RecoveryErrorInfo(detail="no Worker took the task", error_type="Timeout")
    for effect, always in ((ToolEffect.NON_IDEMPOTENT_WRITE, True), (ToolEffect.READ, False)):
        changes = record_failure_route(
            record(effect=effect), error, outcome_unknown_always=always, never_started=True
        )
        written = changes.written_records[0]
        assert written.status is AgentToolCallStatus.FAILED
        assert written.error == f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: no Worker took the task"
    # A call whose tool asked a question ran before: its effect decides.
    asked = record(effect=ToolEffect.NON_IDEMPOTENT_WRITE, input_answers=("yes",))
    kept = record_failure_route(asked, error, outcome_unknown_always=True, never_started=True)
    assert kept.written_records[0].status is AgentToolCallStatus.OUTCOME_UNKNOWN


def test_idempotency_key_and_open_records() -> None:
    assert idempotency_key("s-1", record("c9")) == "s-1/turn-1/c9"
    assert open_record_count([record("a"), record("b", status=AgentToolCallStatus.FAILED)]) == 1


# --- approvals ---------------------------------------------------------------------------


def _interrupt(
    deadline: str | None = "2026-11-29T12:00:10.000Z", kind: InterruptKind = InterruptKind.APPROVAL
):
    from dex_agents import AgentInterrupt

    return AgentInterrupt(
        interrupt_id="c1",
        kind=kind,
        turn_id="turn-1",
        tool_call_id="c1",
        tool_name="lookup",
        arguments="{}",
        deadline=deadline,
    )


def test_resolve_interrupt_accepts_only_pending_before_deadline() -> None:
    pending = (_interrupt(),)
    accepted = decide_resolve_interrupt(
        pending, ResolveInterruptInput("c1", False, "no thanks"), NOW
    )
    assert accepted.accepted
    assert accepted.pending == ()
    assert accepted.resolution == AgentInterruptResolution(
        interrupt_id="c1", approved=False, rejection_message="no thanks"
    )
    assert not decide_resolve_interrupt((), ResolveInterruptInput("c1", True), NOW).accepted
    assert not decide_resolve_interrupt(
        pending, ResolveInterruptInput("c1", True), NOW + timedelta(seconds=10)
    ).accepted
    question = (_interrupt(kind=InterruptKind.QUESTION),)
    assert not decide_resolve_interrupt(question, ResolveInterruptInput("c1", True), NOW).accepted
    assert decide_resolve_interrupt(question, ResolveInterruptInput("c1", False), NOW).accepted


def test_approval_wait_rounds_up_and_drops_the_timer_once_resolved() -> None:
    assert approval_wait((_interrupt(),), "c1", NOW - timedelta(milliseconds=1)).timer_seconds == 11
    assert approval_wait((_interrupt(),), "c1", NOW + timedelta(seconds=30)).timer_seconds == 0
    assert approval_wait((_interrupt(deadline=None),), "c1", NOW).timer_seconds is None
    assert approval_wait((), "c1", NOW).timer_seconds is None


def test_approval_outcomes() -> None:
    waiting = record(
        status=AgentToolCallStatus.AWAITING_APPROVAL, effect=ToolEffect.NON_IDEMPOTENT_WRITE
    )
    approved = apply_approval_resolution(waiting, AgentInterruptResolution("c1", True))
    assert approved.next_step is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL
    assert approved.changes.written_records[0].status is AgentToolCallStatus.APPROVED
    assert approved.changes.completed_tool_calls == []
    rejected = apply_approval_resolution(waiting, AgentInterruptResolution("c1", False, "no"))
    assert rejected.next_step is None
    assert rejected.changes.completed_tool_calls == ["c1"]
    assert [e.type for e in rejected.changes.events] == ["interrupt_resolved", "tool_call_finished"]
    assert rejected.changes.events[0].payload == {
        "interrupt_id": "c1",
        "kind": "approval",
        "approved": False,
        "answered": False,
        "rejection_message": "no",
        "cancellation_reason": None,
    }
    expired = apply_approval_timer(waiting, (_interrupt(),), NOW + timedelta(seconds=10))
    assert expired.changes.written_records[0].rejection_message == APPROVAL_DEADLINE_PASSED
    assert expired.changes.pending_interrupts == ()
    early = apply_approval_timer(waiting, (_interrupt(),), NOW)
    assert early.wait_again
    assert early.changes.written_records == []
    resolved_first = apply_approval_timer(waiting, (), NOW + timedelta(seconds=10))
    assert resolved_first.wait_again


# --- reads --------------------------------------------------------------------------------


def test_blank_messages_are_refused_by_python_strip() -> None:
    assert not accepts_user_message(AgentUserMessage(text=" \t\n\u3000\x1c"))
    assert accepts_user_message(AgentUserMessage(text=" hi "))
    assert not accepts_user_message(AgentUserMessage(text="plan", plan_mode=True))


def test_the_message_limit_counts_utf8_bytes_of_the_text() -> None:
    limit = 512 * 1024
    # 100,000 CJK characters are 300,000 bytes of UTF-8 (600,000 as stored JSON).
    assert accepts_user_message(AgentUserMessage(text="字" * 100_000), max_bytes=limit)
    assert accepts_user_message(AgentUserMessage(text="a" * limit), max_bytes=limit)
    assert not accepts_user_message(AgentUserMessage(text="a" * (limit + 1)), max_bytes=limit)
    assert not accepts_user_message(AgentUserMessage(text="é" * (limit // 2 + 1)), max_bytes=limit)
    # Stored escaped (six bytes a character), past 1.5 times the limit: its two stored
    # copies would not fit one engine value.
    assert not accepts_user_message(AgentUserMessage(text="字" * 140_000), max_bytes=limit)


def test_message_paging_clamps_the_limit() -> None:
    messages = [
        AgentMessage(sequence=n, turn_id="turn-1", role="user", framework_item="{}")
        for n in range(1, 301)
    ]
    first = page_messages(messages, ListAgentMessagesInput())
    assert [m.sequence for m in first.messages] == list(range(251, 301))
    assert first.next_before_sequence == 251
    big = page_messages(messages, ListAgentMessagesInput(before_sequence=251, limit=10_000))
    assert len(big.messages) == 200
    assert big.messages[-1].sequence == 250
    small = page_messages(messages, ListAgentMessagesInput(before_sequence=3, limit=0))
    assert [m.sequence for m in small.messages] == [2]
    last = page_messages(messages, ListAgentMessagesInput(before_sequence=2, limit=5))
    assert [m.sequence for m in last.messages] == [1]
    assert last.next_before_sequence is None
    assert last.deleted_before_sequence is None


def test_blank_rejection_message_counts_as_none() -> None:
    decision = decide_resolve_interrupt(
        (_interrupt(),), ResolveInterruptInput("c1", False, "  "), NOW
    )
    assert decision.resolution is not None
    assert decision.resolution.rejection_message is None
    approved = decide_resolve_interrupt(
        (_interrupt(),), ResolveInterruptInput("c1", True, "ignored"), NOW
    )
    assert approved.resolution is not None
    assert approved.resolution.rejection_message is None
