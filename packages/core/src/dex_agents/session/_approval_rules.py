"""Pure rules of approvals: resolving an interrupt, its deadline, and the approval's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from dex_agents._texts import APPROVAL_DEADLINE_PASSED
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentToolCall,
    AgentToolCallStatus,
    InterruptKind,
    ResolveInterruptInput,
    parse_timestamp,
)
from dex_agents.session._changes import EventSpec, SessionChanges
from dex_agents.session._interrupts import (
    InterruptDecision,
    find_interrupt,
    interrupt_resolved_payload,
    is_past_deadline,
    timer_seconds_until,
    without_interrupt,
)
from dex_agents.session._routing import ToolStepKind, tool_step_kind
from dex_agents.session._tool_rules import finish_tool_call

__all__ = [
    "ApprovalOutcome",
    "ApprovalWait",
    "apply_approval_resolution",
    "apply_approval_timer",
    "approval_wait",
    "decide_resolve_interrupt",
]


def decide_resolve_interrupt(
    pending: Sequence[AgentInterrupt], request: ResolveInterruptInput, now: datetime
) -> InterruptDecision:
    """Accept a resolution only for a pending interrupt before its deadline.

    A question cannot be approved, only declined (answer it with ``answer_question``).
    The accepted interrupt leaves ``PendingInterrupts`` at once, so a second call
    returns ``False``.
    """
    interrupt = find_interrupt(pending, request.interrupt_id)
    if interrupt is None or is_past_deadline(interrupt, now):
        return InterruptDecision(False)
    if interrupt.kind is InterruptKind.QUESTION and request.approved:
        return InterruptDecision(False)
    remaining = without_interrupt(pending, request.interrupt_id)
    resolution = AgentInterruptResolution(
        interrupt_id=request.interrupt_id,
        approved=request.approved,
        rejection_message=None if request.approved else _message_or_none(request.rejection_message),
    )
    return InterruptDecision(True, remaining, resolution)


def _message_or_none(message: str | None) -> str | None:
    """A blank rejection message counts as none, so the model sees the default text."""
    return message if message is not None and message.strip() else None


@dataclass(frozen=True)
class ApprovalWait:
    """What ``AwaitToolApproval`` waits for: the resolution, and a Timer when set."""

    timer_seconds: int | None


def approval_wait(
    pending: Sequence[AgentInterrupt], interrupt_id: str, now: datetime
) -> ApprovalWait:
    """Wait for the resolution, raced with a Timer while the interrupt is pending with a deadline.

    Dex Timers take whole seconds, so the remaining time is rounded up; a Timer can
    fire up to a second late, and ``resolve_interrupt`` already refuses from the
    deadline on. Once the interrupt is no longer pending, its resolution is on the
    Channel, so the wait has no Timer (a due Timer would win every race).
    """
    interrupt = find_interrupt(pending, interrupt_id)
    if interrupt is None or interrupt.deadline is None:
        return ApprovalWait(None)
    return ApprovalWait(timer_seconds_until(parse_timestamp(interrupt.deadline), now))


@dataclass(frozen=True)
class ApprovalOutcome:
    """The result of ``AwaitToolApproval``'s execute.

    ``next_step`` runs the approved call; ``wait_again`` starts a new wait; with
    neither, the path ends after the changes (the call is final).
    """

    changes: SessionChanges
    next_step: ToolStepKind | None = None
    wait_again: bool = False


def apply_approval_resolution(
    record: AgentToolCall, resolution: AgentInterruptResolution
) -> ApprovalOutcome:
    """An approval moves the call to its tool Step; a rejection makes it final."""
    if record.is_final:
        return ApprovalOutcome(SessionChanges())
    if resolution.approved:
        changes = SessionChanges()
        changes.written_records.append(replace(record, status=AgentToolCallStatus.APPROVED))
        changes.event(
            "interrupt_resolved",
            **interrupt_resolved_payload(
                resolution.interrupt_id, InterruptKind.APPROVAL, approved=True
            ),
        )
        return ApprovalOutcome(changes, next_step=tool_step_kind(record.effect))
    changes = finish_tool_call(
        record, AgentToolCallStatus.REJECTED, rejection_message=resolution.rejection_message
    )
    changes.events.insert(
        0,
        _resolved_event(
            resolution.interrupt_id,
            approved=False,
            rejection_message=resolution.rejection_message,
        ),
    )
    return ApprovalOutcome(changes)


def apply_approval_timer(
    record: AgentToolCall, pending: Sequence[AgentInterrupt], now: datetime
) -> ApprovalOutcome:
    """The deadline Timer fired: reject the call if its interrupt is still pending and due.

    When ``resolve_interrupt`` removed the interrupt first, or the Timer fired
    early, wait again: the next wait consumes the resolution or re-arms the Timer.
    """
    if record.is_final:
        return ApprovalOutcome(SessionChanges())
    interrupt = find_interrupt(pending, record.tool_call_id)
    if interrupt is None or not is_past_deadline(interrupt, now):
        return ApprovalOutcome(SessionChanges(), wait_again=True)
    changes = finish_tool_call(
        record, AgentToolCallStatus.REJECTED, rejection_message=APPROVAL_DEADLINE_PASSED
    )
    changes.pending_interrupts = without_interrupt(pending, interrupt.interrupt_id)
    changes.events.insert(
        0,
        _resolved_event(
            interrupt.interrupt_id, approved=False, rejection_message=APPROVAL_DEADLINE_PASSED
        ),
    )
    return ApprovalOutcome(changes)


def _resolved_event(
    interrupt_id: str, *, approved: bool, rejection_message: str | None
) -> EventSpec:
    return EventSpec(
        "interrupt_resolved",
        interrupt_resolved_payload(
            interrupt_id,
            InterruptKind.APPROVAL,
            approved=approved,
            rejection_message=rejection_message,
        ),
    )
