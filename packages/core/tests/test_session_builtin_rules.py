"""Pure rules of the built-in tools and of questions, without an engine."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from dex_agents import (
    AgentInterrupt,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    InterruptKind,
    ToolEffect,
)
from dex_agents._texts import QUESTION_DEADLINE_PASSED
from dex_agents.runner import (
    QUESTION_DECLINED,
    DeferredToolCall,
    ResolvedToolPolicy,
    RunnerDefectError,
    ToolCallsRequested,
    ToolInputRequested,
)
from dex_agents.session._builtin_rules import (
    InvalidBuiltInArguments,
    decide_answer_question,
    parse_ask_user,
    parse_durable_wait,
)
from dex_agents.session._question_rules import (
    apply_question_resolution,
    apply_question_timer,
    question_wait_seconds,
    record_tool_question,
)
from dex_agents.session._routing import ToolStepKind
from dex_agents.session._turn_rules import (
    request_tool_calls,
    start_turn,
)
from dex_agents.values import (
    AgentInterruptResolution,
    AgentState,
    AnswerQuestionInput,
    FrameworkMessage,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
YEAR = timedelta(days=365)


def test_ask_user_arguments() -> None:
    asked = parse_ask_user(
        '{"question": "Size?", "choices": ["S", "M"], "allows_free_text": false}'
    )
    assert (asked.question, asked.choices, asked.allows_free_text) == ("Size?", ("S", "M"), False)
    nulls = parse_ask_user('{"question": "Why?", "choices": null, "allows_free_text": null}')
    assert (nulls.choices, nulls.allows_free_text) == (None, True)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("[]", "must be a JSON object"),
        ("{", "not valid JSON"),
        ('{"question": " \\u3000 "}', "question must be a non-blank string"),
        ('{"question": "q", "extra": 1}', "unexpected argument 'extra'"),
        ('{"question": "q", "choices": "S"}', "choices must be a list"),
        ('{"question": "q", "choices": ["S", " "]}', "non-blank"),
        ('{"question": "q", "choices": ["S", "S"]}', "must not repeat"),
        ('{"question": "q", "allows_free_text": false}', "only with choices"),
        ('{"question": "q", "allows_free_text": "no"}', "must be a boolean"),
    ],
)
def test_invalid_ask_user_arguments(arguments: str, reason: str) -> None:
    with pytest.raises(InvalidBuiltInArguments, match=reason):
        parse_ask_user(arguments)


def test_durable_wait_arguments() -> None:
    assert (
        parse_durable_wait('{"duration_seconds": 60, "reason": "r"}', YEAR).duration_seconds == 60
    )
    assert parse_durable_wait('{"duration_seconds": 5.0, "reason": ""}', YEAR).duration_seconds == 5
    for arguments, reason in [
        ('{"duration_seconds": 0, "reason": "r"}', "from 1 to 31536000"),
        ('{"duration_seconds": 31536001, "reason": "r"}', "from 1 to 31536000"),
        ('{"duration_seconds": true, "reason": "r"}', "whole number"),
        ('{"duration_seconds": 1.5, "reason": "r"}', "whole number"),
        ('{"duration_seconds": 5}', "reason must be a string"),
    ]:
        with pytest.raises(InvalidBuiltInArguments, match=reason):
            parse_durable_wait(arguments, YEAR)
    minute = timedelta(minutes=1)
    assert (
        parse_durable_wait('{"duration_seconds": 60, "reason": ""}', minute).duration_seconds == 60
    )
    with pytest.raises(InvalidBuiltInArguments, match="from 1 to 60"):
        parse_durable_wait('{"duration_seconds": 61, "reason": ""}', minute)
    nulls = '{"duration_seconds": null, "reason": "r"}'
    with pytest.raises(InvalidBuiltInArguments, match="whole number"):
        parse_durable_wait(nulls, YEAR)


def _question(
    choices: tuple[str, ...] | None = ("S", "M"), free: bool | None = False
) -> AgentInterrupt:
    return AgentInterrupt(
        interrupt_id="q1",
        kind=InterruptKind.QUESTION,
        turn_id="turn-1",
        tool_call_id="q1",
        tool_name="ask_user",
        arguments="{}",
        deadline="2026-11-29T12:00:05.000Z",
        question="Size?",
        choices=choices,
        allows_free_text=free,
    )


def test_answer_question_rules() -> None:
    pending = (_question(),)
    assert decide_answer_question(pending, AnswerQuestionInput("q1", "M"), NOW).accepted
    assert not decide_answer_question(pending, AnswerQuestionInput("q1", "L"), NOW).accepted
    assert not decide_answer_question(pending, AnswerQuestionInput("q1", "\n"), NOW).accepted
    assert not decide_answer_question(
        pending, AnswerQuestionInput("q1", "M"), NOW + timedelta(seconds=5)
    ).accepted
    assert decide_answer_question(
        (_question(free=None),), AnswerQuestionInput("q1", "L"), NOW
    ).accepted
    approval = AgentInterrupt(
        interrupt_id="q1",
        kind=InterruptKind.APPROVAL,
        turn_id="turn-1",
        tool_call_id="q1",
        tool_name="t",
        arguments="{}",
    )
    assert not decide_answer_question((approval,), AnswerQuestionInput("q1", "M"), NOW).accepted
    accepted = decide_answer_question(pending, AnswerQuestionInput("q1", "S"), NOW)
    assert accepted.pending == ()
    assert accepted.resolution == AgentInterruptResolution(
        interrupt_id="q1", approved=True, answer="S"
    )


def _requested(*calls: tuple[str, str, str]) -> ToolCallsRequested:
    policy = ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)
    return ToolCallsRequested(
        framework_run_state="s",
        tool_calls=[
            DeferredToolCall(call_id, name, arguments, policy) for call_id, name, arguments in calls
        ],
        usage=AgentUsage(),
    )


def test_run_model_routes_built_in_calls_with_a_fixed_policy() -> None:
    start, _ = start_turn(AgentState(), FrameworkMessage(role="user", framework_item="{}"))
    assert start.state is not None
    changes, routing = request_tool_calls(
        start.state,
        _requested(
            ("q1", "ask_user", '{"question": "Size?"}'),
            ("w1", "durable_wait", '{"duration_seconds": 90, "reason": "later"}'),
            ("bad", "durable_wait", '{"duration_seconds": -1, "reason": "x"}'),
            ("other", "ask_user_like", "{}"),
        ),
        session_usage=AgentUsage(),
        records=[],
        pending_interrupts=(),
        now=NOW,
        interrupt_deadline=timedelta(minutes=1),
        built_in_tools=("ask_user", "durable_wait"),
    )
    assert routing.resume_count == 4
    assert [(m.tool_call_id, m.kind) for m in routing.tool_steps] == [
        ("q1", ToolStepKind.AWAIT_QUESTION),
        ("w1", ToolStepKind.AWAIT_TIMER),
        ("other", ToolStepKind.AWAIT_APPROVAL),
    ]
    records = {r.tool_call_id: r for r in changes.written_records}
    assert records["q1"].status is AgentToolCallStatus.AWAITING_ANSWER
    assert (records["q1"].effect, records["q1"].requires_approval) == (ToolEffect.READ, False)
    assert records["w1"].status is AgentToolCallStatus.WAITING_FOR_TIMER
    assert records["w1"].wait_until == "2026-11-29T12:01:30.000Z"
    assert records["bad"].status is AgentToolCallStatus.FAILED
    assert (
        records["bad"].error
        == "invalid durable_wait arguments: duration_seconds must be from 1 to 31536000"
    )
    assert changes.completed_tool_calls == ["bad"]
    assert changes.pending_interrupts is not None
    question = next(i for i in changes.pending_interrupts if i.interrupt_id == "q1")
    assert question.kind is InterruptKind.QUESTION
    assert question.deadline == "2026-11-29T12:01:00.000Z"
    types = [e.type for e in changes.events]
    assert types.count("timer_started") == 1
    assert "tool_call_finished" in types


def _tool_record(**changes: object) -> AgentToolCall:
    record = AgentToolCall(
        tool_call_id="d1",
        turn_id="turn-1",
        tool_name="deploy",
        arguments="{}",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=False,
        status=AgentToolCallStatus.APPROVED,
        deferral_order=0,
    )
    from dataclasses import replace

    return replace(record, **changes)  # type: ignore[arg-type]


def test_a_tool_question_is_recorded_then_raised_then_answered() -> None:
    asked = record_tool_question(
        _tool_record(), ToolInputRequested("Region?", choices=("eu", "us"), continuation="c")
    )
    assert asked.status is AgentToolCallStatus.AWAITING_ANSWER
    assert (asked.input_question, asked.input_choices, asked.input_continuation) == (
        "Region?",
        ("eu", "us"),
        "c",
    )
    assert question_wait_seconds(asked, (), is_ask_user=False, has_resolution=False, now=NOW) == 0

    raised = apply_question_timer(
        asked,
        (),
        is_ask_user=False,
        has_resolution=False,
        turn_records=[asked],
        now=NOW,
        interrupt_deadline_at=None,
    )
    assert raised.wait_again
    assert raised.changes.pending_interrupts is not None
    (interrupt,) = raised.changes.pending_interrupts
    assert interrupt.interrupt_id == "d1-input-1"
    assert interrupt.choices == ("eu", "us")
    assert (
        question_wait_seconds(asked, (interrupt,), is_ask_user=False, has_resolution=False, now=NOW)
        is None
    )

    answered = apply_question_resolution(
        asked, AgentInterruptResolution("d1-input-1", True, answer="eu"), is_ask_user=False
    )
    assert answered.next_step is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL
    rerun = answered.changes.written_records[0]
    assert rerun.status is AgentToolCallStatus.APPROVED
    assert rerun.input_answers == ("eu",)
    assert rerun.input_continuation == "c"
    assert answered.changes.completed_tool_calls == []

    second = record_tool_question(rerun, ToolInputRequested("Size?"))
    clash = apply_question_timer(
        second,
        (),
        is_ask_user=False,
        has_resolution=False,
        turn_records=[second, _tool_record(tool_call_id="d1-input-2")],
        now=NOW,
        interrupt_deadline_at=None,
    )
    assert clash.changes.written_records[0].status is AgentToolCallStatus.FAILED
    assert clash.changes.written_records[0].error == (
        "the tool's question cannot use interrupt ID d1-input-2, "
        "which another tool call of this turn uses"
    )


def test_question_declines_and_deadlines() -> None:
    ask = _tool_record(
        tool_call_id="q1",
        tool_name="ask_user",
        effect=ToolEffect.READ,
        status=AgentToolCallStatus.AWAITING_ANSWER,
    )
    declined = apply_question_resolution(
        ask, AgentInterruptResolution("q1", False), is_ask_user=True
    )
    assert declined.changes.written_records[0].status is AgentToolCallStatus.REJECTED
    assert declined.changes.written_records[0].rejection_message == QUESTION_DECLINED
    answered = apply_question_resolution(
        ask, AgentInterruptResolution("q1", True, answer='say "hi"'), is_ask_user=True
    )
    assert json.loads(answered.changes.written_records[0].output or "") == {
        "status": "answered",
        "answer": 'say "hi"',
    }
    due = apply_question_timer(
        ask,
        (_question(),),
        is_ask_user=True,
        has_resolution=False,
        turn_records=[ask],
        now=NOW + timedelta(seconds=5),
        interrupt_deadline_at=None,
    )
    assert due.changes.written_records[0].rejection_message == QUESTION_DEADLINE_PASSED
    assert due.changes.pending_interrupts == ()
    early = apply_question_timer(
        ask,
        (_question(),),
        is_ask_user=True,
        has_resolution=False,
        turn_records=[ask],
        now=NOW,
        interrupt_deadline_at=None,
    )
    assert early.wait_again


def test_bad_tool_questions_are_runner_defects() -> None:
    with pytest.raises(RunnerDefectError, match="blank question"):
        record_tool_question(_tool_record(), ToolInputRequested("  "))
    with pytest.raises(RunnerDefectError, match="no free text"):
        record_tool_question(_tool_record(), ToolInputRequested("q", allows_free_text=False))
