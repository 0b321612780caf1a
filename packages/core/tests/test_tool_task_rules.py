"""Pure rules of tool tasks, without an engine: the interval rule, starting a task,
applying a poll's outcome, a task's question and its resolution, steering and
cancellation around a started task, and the failure routes."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from dex import RecoveryErrorInfo

from dex_agents._texts import MISSING_TOOL_TASK_POLLER
from dex_agents.runner import (
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    QuestionAnswer,
    RunnerDefectError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents.session._question_rules import (
    apply_question_resolution,
    apply_question_timer,
)
from dex_agents.session._routing import ToolStepKind
from dex_agents.session._tool_rules import record_failure_route
from dex_agents.session._tool_task_rules import (
    PollNext,
    abandon_task,
    apply_poll_outcome,
    missing_poller,
    poll_interval_seconds,
    poll_wait_seconds,
    start_task,
    task_question_answer,
)
from dex_agents.session._turn_control_rules import finish_turn_cancellation, steer_wake
from dex_agents.values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    InterruptKind,
    ToolEffect,
    format_timestamp,
)


def _record(
    status: AgentToolCallStatus = AgentToolCallStatus.APPROVED,
    effect: ToolEffect = ToolEffect.IDEMPOTENT_WRITE,
    **fields: object,
) -> AgentToolCall:
    record = AgentToolCall(
        tool_call_id="c1",
        turn_id="turn-1",
        tool_name="make_report",
        arguments="{}",
        effect=effect,
        requires_approval=False,
        status=status,
        deferral_order=0,
    )
    return replace(record, **fields)  # type: ignore[arg-type]


def _waiting(**fields: object) -> AgentToolCall:
    base: dict[str, object] = {"task_id": "job-1", "task_poll_interval_seconds": 5}
    base.update(fields)
    return _record(AgentToolCallStatus.WAITING_FOR_TASK, **base)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(0, 1), (0.2, 1), (1, 1), (1.01, 2), (59.5, 60), (86_400, 86_400), (10**9, 86_400)],
)
def test_the_interval_rounds_up_to_whole_seconds_from_one_to_a_day(
    value: float, seconds: int
) -> None:
    assert poll_interval_seconds(value) == seconds


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, "5", True, None])
def test_an_invalid_interval_is_a_runner_defect(value: object) -> None:
    with pytest.raises(RunnerDefectError):
        poll_interval_seconds(value)


def test_starting_a_task_records_waiting_for_task_and_writes_tool_task_started() -> None:
    changes = start_task(_record(), ToolTaskStarted("job-1", 2.5))
    (record,) = changes.written_records
    assert record.status is AgentToolCallStatus.WAITING_FOR_TASK
    assert (record.task_id, record.task_poll_interval_seconds) == ("job-1", 3)
    assert changes.completed_tool_calls == []
    assert [(e.type, dict(e.payload)) for e in changes.events] == [
        (
            "tool_task_started",
            {"tool_call_id": "c1", "tool_name": "make_report", "task_id": "job-1"},
        )
    ]


@pytest.mark.parametrize("task_id", ["", "  "])
def test_a_blank_task_id_is_a_runner_defect(task_id: str) -> None:
    with pytest.raises(RunnerDefectError):
        start_task(_record(), ToolTaskStarted(task_id, 1))


@pytest.mark.parametrize(
    ("effect", "status"),
    [
        (ToolEffect.READ, AgentToolCallStatus.FAILED),
        (ToolEffect.IDEMPOTENT_WRITE, AgentToolCallStatus.OUTCOME_UNKNOWN),
        (ToolEffect.UNCLASSIFIED, AgentToolCallStatus.OUTCOME_UNKNOWN),
    ],
)
def test_a_missing_poller_records_the_call_by_effect(
    effect: ToolEffect, status: AgentToolCallStatus
) -> None:
    changes = missing_poller(_record(effect=effect))
    (record,) = changes.written_records
    assert (record.status, record.error) == (status, MISSING_TOOL_TASK_POLLER)
    assert changes.completed_tool_calls == ["c1"]


def test_the_poll_waits_the_interval_or_not_at_all_with_a_pending_answer() -> None:
    assert poll_wait_seconds(_waiting()) == 5
    assert poll_wait_seconds(_waiting(task_answer_pending=True)) == 0


def test_a_poll_result_makes_the_record_final() -> None:
    result = apply_poll_outcome(_waiting(), ToolExecutionResult("done"))
    (record,) = result.changes.written_records
    assert result.next is PollNext.DONE
    assert (record.status, record.output) == (AgentToolCallStatus.SUCCEEDED, "done")
    assert result.changes.completed_tool_calls == ["c1"]


def test_a_pending_poll_stores_the_interval_and_continuation_and_clears_the_answer() -> None:
    record = _waiting(task_answer_pending=True, input_answers=("csv",), input_continuation="q1")
    result = apply_poll_outcome(record, ToolTaskPending(30, continuation="q1"))
    (stored,) = result.changes.written_records
    assert result.next is PollNext.POLL_AGAIN
    assert stored.task_poll_interval_seconds == 30
    assert stored.input_continuation == "q1"
    assert stored.task_answer_pending is False
    assert task_question_answer(stored) is None
    cleared = apply_poll_outcome(stored, ToolTaskPending(30)).changes.written_records[0]
    assert cleared.input_continuation is None


def test_a_polled_question_asks_the_user() -> None:
    result = apply_poll_outcome(
        _waiting(), ToolInputRequested("Which format?", choices=("pdf",), continuation="q1")
    )
    (record,) = result.changes.written_records
    assert result.next is PollNext.ASK
    assert record.status is AgentToolCallStatus.AWAITING_ANSWER
    assert (record.input_question, record.input_continuation) == ("Which format?", "q1")
    assert record.task_id == "job-1"


def test_anything_else_from_a_poll_is_a_runner_defect() -> None:
    with pytest.raises(RunnerDefectError):
        apply_poll_outcome(_waiting(), ToolTaskStarted("job-2", 1))


def _asked(**fields: object) -> AgentToolCall:
    return _record(
        AgentToolCallStatus.AWAITING_ANSWER,
        task_id="job-1",
        task_poll_interval_seconds=5,
        input_question="Which format?",
        input_choices=("pdf", "csv"),
        input_allows_free_text=False,
        input_continuation="q1",
        **fields,
    )


def test_an_answered_task_question_goes_back_to_the_task_on_the_next_poll() -> None:
    outcome = apply_question_resolution(
        _asked(),
        AgentInterruptResolution(interrupt_id="c1-input-1", approved=True, answer="csv"),
        is_ask_user=False,
    )
    (record,) = outcome.changes.written_records
    assert outcome.next_step is ToolStepKind.POLL_TOOL_TASK
    assert record.status is AgentToolCallStatus.WAITING_FOR_TASK
    assert record.input_continuation == "q1"
    assert record.input_question is None
    assert outcome.changes.completed_tool_calls == []
    assert task_question_answer(record) == QuestionAnswer("answered", "csv")
    assert poll_wait_seconds(record) == 0
    # The next question of the task gets the next interrupt ID.
    assert record.input_answers == ("csv",)


def test_a_declined_task_question_goes_back_as_declined() -> None:
    outcome = apply_question_resolution(
        _asked(),
        AgentInterruptResolution(interrupt_id="c1-input-1", approved=False),
        is_ask_user=False,
    )
    (record,) = outcome.changes.written_records
    assert outcome.next_step is ToolStepKind.POLL_TOOL_TASK
    assert record.status is AgentToolCallStatus.WAITING_FOR_TASK
    assert task_question_answer(record) == QuestionAnswer("declined")


def test_a_task_question_past_its_deadline_goes_back_as_deadline_passed() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    interrupt = AgentInterrupt(
        interrupt_id="c1-input-1",
        kind=InterruptKind.QUESTION,
        turn_id="turn-1",
        tool_call_id="c1",
        tool_name="make_report",
        arguments="{}",
        deadline=format_timestamp(now - timedelta(seconds=1)),
        question="Which format?",
    )
    outcome = apply_question_timer(
        _asked(),
        (interrupt,),
        is_ask_user=False,
        has_resolution=False,
        turn_records=(),
        now=now,
        interrupt_deadline_at=None,
    )
    (record,) = outcome.changes.written_records
    assert outcome.next_step is ToolStepKind.POLL_TOOL_TASK
    assert outcome.changes.pending_interrupts == ()
    assert task_question_answer(record) == QuestionAnswer("deadline_passed")


def test_steering_keeps_a_task_question_and_never_cancels_a_task() -> None:
    task = _asked()
    approval = _record(AgentToolCallStatus.AWAITING_APPROVAL, tool_call_id="c2")
    pending = tuple(
        AgentInterrupt(
            interrupt_id=interrupt_id,
            kind=kind,
            turn_id="turn-1",
            tool_call_id=call_id,
            tool_name="make_report",
            arguments="{}",
        )
        for interrupt_id, kind, call_id in (
            ("c1-input-1", InterruptKind.QUESTION, "c1"),
            ("c2", InterruptKind.APPROVAL, "c2"),
        )
    )
    changes = steer_wake("turn-1", (task, approval), pending, "steered")
    assert changes.pending_interrupts is not None
    assert [i.interrupt_id for i in changes.pending_interrupts] == ["c1-input-1"]
    assert changes.tool_call_cancellations == {"c2": "steered"}


def test_cancel_turn_hands_started_tasks_to_cancel_tool_task() -> None:
    state = AgentState(status=AgentStatus.RUNNING_TOOLS, turn_count=1, active_turn_id="turn-1")
    waiting = _waiting()
    asked = _asked(tool_call_id="c2")
    approval = _record(AgentToolCallStatus.AWAITING_APPROVAL, tool_call_id="c3")
    outcome = finish_turn_cancellation(state, "turn-1", (waiting, asked, approval), ())
    assert outcome.abandoned_tasks == ("c1", "c2")
    assert [r.tool_call_id for r in outcome.changes.written_records] == ["c3"]
    assert outcome.changes.written_records[0].status is AgentToolCallStatus.REJECTED


def test_an_abandoned_task_records_outcome_unknown_with_turn_cancelled() -> None:
    changes = abandon_task(_waiting(task_answer_pending=True))
    (record,) = changes.written_records
    assert record.status is AgentToolCallStatus.OUTCOME_UNKNOWN
    assert record.cancellation_reason == "turn_cancelled"
    assert changes.completed_tool_calls == ["c1"]


def test_a_poll_that_never_started_still_records_the_started_task_by_effect() -> None:
    error = RecoveryErrorInfo(detail="no Worker", error_type="Timeout")
    changes = record_failure_route(
        _waiting(effect=ToolEffect.READ), error, outcome_unknown_always=False, never_started=True
    )
    (record,) = changes.written_records
    assert record.status is AgentToolCallStatus.FAILED
    assert not (record.error or "").startswith(TOOL_CALL_NOT_RUN_ERROR_PREFIX)
    write = record_failure_route(
        _waiting(), error, outcome_unknown_always=False, never_started=True
    ).written_records[0]
    assert write.status is AgentToolCallStatus.OUTCOME_UNKNOWN
