"""Pure rules of questions: ``ask_user`` and a tool's own questions (``ToolInputRequested``).

``ask_user`` raises its question in ``RunModel``'s commit, with the tool call ID as
the interrupt ID. A tool's question is recorded by its tool Step, which runs
without the ``PendingInterrupts`` lock, so ``AwaitQuestionAnswer`` raises it as
``<tool_call_id>-input-<n>`` under the lock and then waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from dex_agents._contract import RunnerDefectError, ToolInputRequested
from dex_agents._texts import QUESTION_DEADLINE_PASSED, QUESTION_DECLINED, question_id_in_use_error
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentToolCall,
    AgentToolCallStatus,
    InterruptKind,
    format_timestamp,
    parse_timestamp,
)
from dex_agents.session._builtin_rules import ask_user_answer_output, question_interrupt_id
from dex_agents.session._changes import EventSpec, SessionChanges
from dex_agents.session._interrupts import (
    find_interrupt,
    interrupt_raised_payload,
    interrupt_resolved_payload,
    is_past_deadline,
    timer_seconds_until,
    without_interrupt,
)
from dex_agents.session._routing import ToolStepKind, tool_step_kind
from dex_agents.session._tool_rules import finish_tool_call

__all__ = [
    "QuestionOutcome",
    "apply_question_resolution",
    "apply_question_timer",
    "question_wait_seconds",
    "record_tool_question",
    "resolve_task_question",
]


def record_tool_question(record: AgentToolCall, request: object) -> AgentToolCall:
    """The record of a tool that asked ``request`` before taking any effect."""
    if not isinstance(request, ToolInputRequested):
        raise TypeError("expected ToolInputRequested")
    question = request.question
    if not isinstance(question, str) or not question.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError(
            f"runner defect: tool call {record.tool_call_id} asked a blank question"
        )
    choices = request.choices
    if choices is not None:
        if isinstance(choices, str) or not all(  # pyright: ignore[reportUnnecessaryIsInstance]
            isinstance(choice, str) and choice.strip()  # pyright: ignore[reportUnnecessaryIsInstance]
            for choice in choices
        ):
            raise RunnerDefectError(
                f"runner defect: the choices of tool call {record.tool_call_id} "
                "must be non-blank strings"
            )
        choices = tuple(choices) or None
    if not isinstance(request.allows_free_text, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError("runner defect: ToolInputRequested.allows_free_text must be a bool")
    if not request.allows_free_text and choices is None:
        raise RunnerDefectError(
            f"runner defect: tool call {record.tool_call_id} allows no free text "
            "and offers no choices"
        )
    continuation = request.continuation
    if continuation is not None and not isinstance(continuation, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError("runner defect: ToolInputRequested.continuation must be text")
    return replace(
        record,
        status=AgentToolCallStatus.AWAITING_ANSWER,
        input_question=question,
        input_choices=choices,
        input_allows_free_text=request.allows_free_text,
        input_continuation=continuation,
    )


def question_wait_seconds(
    record: AgentToolCall,
    pending: Sequence[AgentInterrupt],
    *,
    is_ask_user: bool,
    has_resolution: bool,
    now: datetime,
) -> int | None:
    """The Timer of the wait, or ``None`` to wait only for the resolution.

    An unraised tool question waits on a zero Timer so Execute can raise it under
    the lock; a pending question with a deadline races its Timer.
    """
    interrupt = find_interrupt(pending, question_interrupt_id(record, is_ask_user=is_ask_user))
    if interrupt is None:
        return None if has_resolution or is_ask_user else 0
    if interrupt.deadline is None:
        return None
    return timer_seconds_until(parse_timestamp(interrupt.deadline), now)


@dataclass(frozen=True)
class QuestionOutcome:
    """``next_step`` reruns the tool; ``wait_again`` waits anew; neither ends the path."""

    changes: SessionChanges
    next_step: ToolStepKind | None = None
    wait_again: bool = False


def _resolved(
    interrupt_id: str,
    *,
    approved: bool,
    answered: bool = False,
    rejection_message: str | None = None,
) -> EventSpec:
    return EventSpec(
        "interrupt_resolved",
        interrupt_resolved_payload(
            interrupt_id,
            InterruptKind.QUESTION,
            approved=approved,
            answered=answered,
            rejection_message=rejection_message,
        ),
    )


def _declined(
    record: AgentToolCall, interrupt_id: str, message: str | None, *, deadline: bool
) -> QuestionOutcome:
    text = QUESTION_DEADLINE_PASSED if deadline else (message or QUESTION_DECLINED)
    changes = finish_tool_call(record, AgentToolCallStatus.REJECTED, rejection_message=text)
    changes.events.insert(
        0,
        _resolved(
            interrupt_id,
            approved=False,
            rejection_message=QUESTION_DEADLINE_PASSED if deadline else message,
        ),
    )
    return QuestionOutcome(changes)


def resolve_task_question(
    record: AgentToolCall, answer: str | None, *, declined_message: str | None, deadline: bool
) -> AgentToolCall:
    """A task's question was answered, declined, or passed its deadline: back to polling.

    ``input_answers`` gets one entry per resolved question (blank unless answered), so
    the next question has a new interrupt ID; ``rejection_message`` tells a decline from
    a passed deadline until the next poll hands the ``QuestionAnswer`` over.
    """
    if answer is not None:
        rejection_message = None
    elif deadline:
        rejection_message = QUESTION_DEADLINE_PASSED
    else:
        rejection_message = declined_message or QUESTION_DECLINED
    return replace(
        record,
        status=AgentToolCallStatus.WAITING_FOR_TASK,
        input_answers=(*record.input_answers, answer or ""),
        input_question=None,
        input_choices=None,
        input_allows_free_text=None,
        rejection_message=rejection_message,
        task_answer_pending=True,
    )


def _task_question_resolved(
    record: AgentToolCall,
    event: EventSpec,
    answer: str | None,
    message: str | None,
    *,
    deadline: bool = False,
) -> QuestionOutcome:
    """A task's question never ends the call: its resolution goes back to the task."""
    changes = SessionChanges()
    changes.written_records.append(
        resolve_task_question(record, answer, declined_message=message, deadline=deadline)
    )
    changes.events.append(event)
    return QuestionOutcome(changes, next_step=ToolStepKind.POLL_TOOL_TASK)


def apply_question_resolution(
    record: AgentToolCall, resolution: AgentInterruptResolution, *, is_ask_user: bool
) -> QuestionOutcome:
    """An answer ends ``ask_user`` or reruns the asking tool; a decline rejects the call.

    A task's question goes back to ``PollToolTask`` either way.
    """
    if record.is_final:
        return QuestionOutcome(SessionChanges())
    interrupt_id = question_interrupt_id(record, is_ask_user=is_ask_user)
    answer = resolution.answer
    if record.task_id is not None and not is_ask_user:
        if not resolution.approved or answer is None:
            message = resolution.rejection_message
            event = _resolved(interrupt_id, approved=False, rejection_message=message)
            return _task_question_resolved(record, event, None, message)
        event = _resolved(interrupt_id, approved=True, answered=True)
        return _task_question_resolved(record, event, answer, None)
    if not resolution.approved or answer is None:
        return _declined(record, interrupt_id, resolution.rejection_message, deadline=False)
    resolved = _resolved(interrupt_id, approved=True, answered=True)
    if is_ask_user:
        changes = finish_tool_call(
            record, AgentToolCallStatus.SUCCEEDED, output=ask_user_answer_output(answer)
        )
        changes.events.insert(0, resolved)
        return QuestionOutcome(changes)
    changes = SessionChanges()
    changes.written_records.append(
        replace(
            record,
            status=AgentToolCallStatus.APPROVED,
            input_answers=(*record.input_answers, answer),
            input_question=None,
            input_choices=None,
            input_allows_free_text=None,
        )
    )
    changes.events.append(resolved)
    return QuestionOutcome(changes, next_step=tool_step_kind(record.effect))


def apply_question_timer(
    record: AgentToolCall,
    pending: Sequence[AgentInterrupt],
    *,
    is_ask_user: bool,
    has_resolution: bool,
    turn_records: Sequence[AgentToolCall],
    now: datetime,
    interrupt_deadline_at: datetime | None,
) -> QuestionOutcome:
    """The wait's Timer fired: raise an unraised tool question, or apply a passed deadline."""
    if record.is_final:
        return QuestionOutcome(SessionChanges())
    interrupt_id = question_interrupt_id(record, is_ask_user=is_ask_user)
    interrupt = find_interrupt(pending, interrupt_id)
    if interrupt is None:
        if has_resolution or is_ask_user:
            return QuestionOutcome(SessionChanges(), wait_again=True)
        return _raise_tool_question(
            record, interrupt_id, pending, turn_records, interrupt_deadline_at
        )
    if not is_past_deadline(interrupt, now):
        return QuestionOutcome(SessionChanges(), wait_again=True)
    if record.task_id is not None and not is_ask_user:
        event = _resolved(interrupt_id, approved=False, rejection_message=QUESTION_DEADLINE_PASSED)
        outcome = _task_question_resolved(record, event, None, None, deadline=True)
    else:
        outcome = _declined(record, interrupt_id, None, deadline=True)
    outcome.changes.pending_interrupts = without_interrupt(pending, interrupt_id)
    return outcome


def _raise_tool_question(
    record: AgentToolCall,
    interrupt_id: str,
    pending: Sequence[AgentInterrupt],
    turn_records: Sequence[AgentToolCall],
    deadline_at: datetime | None,
) -> QuestionOutcome:
    if any(other.tool_call_id == interrupt_id for other in turn_records):
        changes = finish_tool_call(
            record, AgentToolCallStatus.FAILED, error=question_id_in_use_error(interrupt_id)
        )
        return QuestionOutcome(changes)
    interrupt = AgentInterrupt(
        interrupt_id=interrupt_id,
        kind=InterruptKind.QUESTION,
        turn_id=record.turn_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        arguments=record.arguments,
        deadline=format_timestamp(deadline_at) if deadline_at is not None else None,
        question=record.input_question,
        choices=record.input_choices,
        allows_free_text=record.input_allows_free_text,
    )
    changes = SessionChanges()
    changes.pending_interrupts = (*pending, interrupt)
    changes.event("interrupt_raised", **interrupt_raised_payload(interrupt))
    return QuestionOutcome(changes, wait_again=True)
