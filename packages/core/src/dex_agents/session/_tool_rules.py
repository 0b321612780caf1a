"""Pure rules of one tool call: final results, failure routes, ``ResumeTurn`` counting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dex import RecoveryErrorInfo

from dex_agents._texts import TOOL_CALL_NOT_RUN_ERROR_PREFIX
from dex_agents._values import AgentToolCall, AgentToolCallStatus, ToolEffect
from dex_agents.session._changes import SessionChanges

__all__ = [
    "finish_tool_call",
    "idempotency_key",
    "open_record_count",
    "record_failure_route",
    "recovery_error_text",
]


def idempotency_key(flow_id: str, record: AgentToolCall) -> str:
    """``<flow_id>/<turn_id>/<tool_call_id>``: the same on every attempt of the call."""
    return f"{flow_id}/{record.turn_id}/{record.tool_call_id}"


def finish_tool_call(
    record: AgentToolCall,
    status: AgentToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    cancellation_reason: str | None = None,
) -> SessionChanges:
    """Make ``record`` final, publish its completion once, and write ``tool_call_finished``.

    A record that is already final stays as it is, so a rerun never publishes twice.
    """
    if not status.is_final:
        raise ValueError(f"{status.value} is not a final tool call status")
    changes = SessionChanges()
    if record.is_final:
        return changes
    changes.written_records.append(
        replace(
            record,
            status=status,
            output=output,
            error=error,
            rejection_message=rejection_message,
            cancellation_reason=cancellation_reason,
        )
    )
    changes.completed_tool_calls.append(record.tool_call_id)
    changes.event(
        "tool_call_finished",
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        status=status.value,
    )
    return changes


def recovery_error_text(recovery_error: RecoveryErrorInfo | None) -> str:
    """The error a failure route records: the final failure's detail, else its type."""
    if recovery_error is None:
        return "the tool call failed"
    detail = recovery_error.detail.strip()
    if detail:
        return detail
    return recovery_error.error_type or "the tool call failed"


def record_failure_route(
    record: AgentToolCall,
    recovery_error: RecoveryErrorInfo | None,
    *,
    outcome_unknown_always: bool,
    never_started: bool = False,
) -> SessionChanges:
    """The final record of a call whose tool Step ran out of attempts, crashed, or timed out.

    A ``read`` call in ``RecordToolFailure`` records ``failed``; any other call, and
    every call in ``RecordToolOutcomeUnknown``, records ``outcome_unknown`` because
    the write may have taken effect. A call whose Step ``never_started``
    (``StepAttemptProgress.NOT_STARTED``) records ``failed`` with
    ``TOOL_CALL_NOT_RUN_ERROR_PREFIX`` instead, unless its tool already asked a question
    or started a task (a ``PollToolTask`` that never ran still leaves the task running).
    """
    text = recovery_error_text(recovery_error)
    ran_before = bool(record.input_answers) or record.input_question is not None
    if never_started and not ran_before and record.task_id is None:
        # No attempt reached a Worker, no earlier Step of the call asked a question, and
        # no task was started: the tool never ran, so the model may call it again.
        return finish_tool_call(
            record, AgentToolCallStatus.FAILED, error=f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: {text}"
        )
    if not outcome_unknown_always and record.effect is ToolEffect.READ:
        return finish_tool_call(record, AgentToolCallStatus.FAILED, error=text)
    return finish_tool_call(record, AgentToolCallStatus.OUTCOME_UNKNOWN, error=text)


def open_record_count(records: Sequence[AgentToolCall]) -> int:
    """Records of the turn that are not final yet; ``ResumeTurn`` waits for each."""
    return sum(1 for record in records if not record.is_final)
