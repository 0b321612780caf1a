"""Pure rules of tool tasks: remote work a tool started and ``PollToolTask`` polls.

The tool Step records ``waiting_for_task`` with the task ID and the poll interval;
each poll stores the next interval and continuation, asks the task's question, or
makes the record final. A task's question never ends the call: its answer, decline
or passed deadline goes back to the task on the next poll. ``tool_tasks.py`` is the
Dex glue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from dex_agents._contract import (
    QuestionAnswer,
    RunnerDefectError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents._texts import MISSING_TOOL_TASK_POLLER, QUESTION_DEADLINE_PASSED
from dex_agents._values import AgentToolCall, AgentToolCallStatus, ToolEffect
from dex_agents.session._changes import SessionChanges
from dex_agents.session._question_rules import record_tool_question
from dex_agents.session._tool_rules import finish_tool_call
from dex_agents.session._turn_control_rules import TURN_CANCELLED

__all__ = [
    "MAX_POLL_INTERVAL_SECONDS",
    "MIN_POLL_INTERVAL_SECONDS",
    "PollNext",
    "PollResult",
    "abandon_task",
    "apply_poll_outcome",
    "missing_poller",
    "poll_interval_seconds",
    "poll_wait_seconds",
    "start_task",
    "task_question_answer",
]

MIN_POLL_INTERVAL_SECONDS = 1
MAX_POLL_INTERVAL_SECONDS = 24 * 60 * 60


def poll_interval_seconds(value: object) -> int:
    """The interval rounded up to whole seconds, from 1 second to a day.

    Anything but a finite non-negative number is a runner defect.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RunnerDefectError("runner defect: poll_interval_seconds must be a number")
    if not math.isfinite(value) or value < 0:
        raise RunnerDefectError(
            f"runner defect: poll_interval_seconds must be a finite number >= 0, got {value!r}"
        )
    return min(max(math.ceil(value), MIN_POLL_INTERVAL_SECONDS), MAX_POLL_INTERVAL_SECONDS)


def start_task(record: AgentToolCall, started: ToolTaskStarted) -> SessionChanges:
    """The tool started remote work: record ``waiting_for_task`` and write ``tool_task_started``."""
    task_id = started.task_id
    if not isinstance(task_id, str) or not task_id.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError(
            f"runner defect: tool call {record.tool_call_id} started a task without a task_id"
        )
    changes = SessionChanges()
    changes.written_records.append(
        replace(
            record,
            status=AgentToolCallStatus.WAITING_FOR_TASK,
            task_id=task_id,
            task_poll_interval_seconds=poll_interval_seconds(started.poll_interval_seconds),
            input_continuation=started.continuation,
            task_answer_pending=False,
        )
    )
    changes.event(
        "tool_task_started",
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        task_id=task_id,
    )
    return changes


def missing_poller(record: AgentToolCall) -> SessionChanges:
    """A runner without ``poll_tool_task`` started a task: record the call by its effect."""
    status = (
        AgentToolCallStatus.FAILED
        if record.effect is ToolEffect.READ
        else AgentToolCallStatus.OUTCOME_UNKNOWN
    )
    return finish_tool_call(record, status, error=MISSING_TOOL_TASK_POLLER)


def poll_wait_seconds(record: AgentToolCall) -> int:
    """How long ``PollToolTask`` waits: at once while an answer is pending, else the interval."""
    if record.task_answer_pending:
        return 0
    return record.task_poll_interval_seconds or MIN_POLL_INTERVAL_SECONDS


def task_question_answer(record: AgentToolCall) -> QuestionAnswer | None:
    """The ``QuestionAnswer`` the next poll hands over, while one is pending."""
    if not record.task_answer_pending or not record.input_answers:
        return None
    answer = record.input_answers[-1]
    if answer:
        return QuestionAnswer("answered", answer)
    if record.rejection_message == QUESTION_DEADLINE_PASSED:
        return QuestionAnswer("deadline_passed")
    return QuestionAnswer("declined")


class PollNext(Enum):
    """Where ``PollToolTask`` goes after a poll."""

    DONE = "done"
    POLL_AGAIN = "poll_again"
    ASK = "ask"


@dataclass(frozen=True)
class PollResult:
    changes: SessionChanges
    next: PollNext


def _delivered(record: AgentToolCall) -> AgentToolCall:
    """The record once the pending answer reached the task."""
    return replace(record, task_answer_pending=False, rejection_message=None)


def apply_poll_outcome(record: AgentToolCall, outcome: object) -> PollResult:
    """Record what one poll returned: the result, the next poll, or the task's question."""
    if record.is_final:
        return PollResult(SessionChanges(), PollNext.DONE)
    if isinstance(outcome, ToolExecutionResult):
        if not isinstance(outcome.output, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(
                f"runner defect: the output of tool call {record.tool_call_id} must be text"
            )
        changes = finish_tool_call(
            _delivered(record), AgentToolCallStatus.SUCCEEDED, output=outcome.output
        )
        return PollResult(changes, PollNext.DONE)
    if isinstance(outcome, ToolTaskPending):
        continuation = outcome.continuation
        if continuation is not None and not isinstance(continuation, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError("runner defect: ToolTaskPending.continuation must be text")
        changes = SessionChanges()
        changes.written_records.append(
            replace(
                _delivered(record),
                task_poll_interval_seconds=poll_interval_seconds(outcome.poll_interval_seconds),
                input_continuation=continuation,
            )
        )
        return PollResult(changes, PollNext.POLL_AGAIN)
    if isinstance(outcome, ToolInputRequested):
        changes = SessionChanges()
        changes.written_records.append(record_tool_question(_delivered(record), outcome))
        return PollResult(changes, PollNext.ASK)
    raise RunnerDefectError(
        "runner defect: poll_tool_task must return ToolExecutionResult, ToolTaskPending "
        f"or ToolInputRequested, got {type(outcome).__name__}"
    )


def abandon_task(record: AgentToolCall) -> SessionChanges:
    """``cancel_turn`` abandoned the task: ``outcome_unknown`` with ``turn_cancelled``."""
    return finish_tool_call(
        _delivered(record),
        AgentToolCallStatus.OUTCOME_UNKNOWN,
        cancellation_reason=TURN_CANCELLED,
    )
