"""Pure rules of steering and turn cancellation.

A steered turn ends at its next safe Step boundary; a cancelled one ends now,
except for tool call Steps that already started. These functions take committed
values and return ``SessionChanges``; ``steering.py`` and ``cancellation.py`` are
the Dex glue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from dex_agents._texts import (
    TOOL_CALL_CANCELLED_BY_STEERING_RESULT,
    TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT,
)
from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    FrameworkMessage,
    InteractionMode,
    TurnCancellationRequest,
    TurnReplySequence,
)
from dex_agents.session._changes import EventSpec, SessionChanges
from dex_agents.session._interrupts import interrupt_resolved_payload
from dex_agents.session._tool_rules import finish_tool_call
from dex_agents.session._turn_rules import start_turn, turn_message_count

__all__ = [
    "STEERED",
    "TURN_CANCELLED",
    "CancellationReason",
    "TurnControl",
    "cancel_wait",
    "cancel_waiting_call",
    "cancelled_call_result",
    "drop_turn_interrupts",
    "end_controlled_turn",
    "finish_turn_cancellation",
    "start_turn_with_messages",
    "steer_wake",
    "turn_control",
]

CancellationReason = Literal["steered", "turn_cancelled"]
STEERED: CancellationReason = "steered"
TURN_CANCELLED: CancellationReason = "turn_cancelled"

WAITING_STATUSES = frozenset(
    {
        AgentToolCallStatus.AWAITING_APPROVAL,
        AgentToolCallStatus.AWAITING_ANSWER,
        AgentToolCallStatus.WAITING_FOR_TIMER,
    }
)
"""Statuses of a call that waits for the user or a Timer and has not started its tool."""


@dataclass(frozen=True)
class TurnControl:
    """Whether the user steered or cancelled the turn; cancellation wins over steering."""

    steered: bool = False
    cancelled: bool = False

    @property
    def reason(self) -> CancellationReason | None:
        if self.cancelled:
            return TURN_CANCELLED
        if self.steered:
            return STEERED
        return None


def turn_control(
    turn_id: str | None,
    *,
    steered_message_count: int,
    cancellation: TurnCancellationRequest | None,
) -> TurnControl:
    """The control of ``turn_id``: steered while steered messages wait, cancelled by its request."""
    if turn_id is None:
        return TurnControl()
    return TurnControl(
        steered=steered_message_count > 0,
        cancelled=cancellation is not None and cancellation.turn_id == turn_id,
    )


def cancelled_call_result(reason: CancellationReason) -> str:
    """What the model sees for a call that steering or cancellation stopped before it started."""
    if reason == TURN_CANCELLED:
        return TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT
    return TOOL_CALL_CANCELLED_BY_STEERING_RESULT


def cancel_waiting_call(record: AgentToolCall, reason: CancellationReason) -> SessionChanges:
    """Record a call that had not started as ``rejected`` with its ``cancellation_reason``."""
    return finish_tool_call(
        record,
        AgentToolCallStatus.REJECTED,
        rejection_message=cancelled_call_result(reason),
        cancellation_reason=reason,
    )


def cancel_wait(
    record: AgentToolCall, reason: CancellationReason, pending: Sequence[AgentInterrupt]
) -> SessionChanges:
    """A waiting Step saw its turn steered or cancelled: reject the call, drop its interrupt."""
    changes = cancel_waiting_call(record, reason)
    remaining = tuple(i for i in pending if i.tool_call_id != record.tool_call_id)
    if len(remaining) != len(pending):
        changes.pending_interrupts = remaining
        for interrupt in pending:
            if interrupt.tool_call_id == record.tool_call_id:
                changes.events.insert(0, _interrupt_cancelled(interrupt, reason))
    return changes


def _interrupt_cancelled(interrupt: AgentInterrupt, reason: CancellationReason) -> EventSpec:
    return EventSpec(
        "interrupt_resolved",
        interrupt_resolved_payload(
            interrupt.interrupt_id, interrupt.kind, approved=False, cancellation_reason=reason
        ),
    )


def drop_turn_interrupts(
    pending: Sequence[AgentInterrupt], turn_id: str, reason: CancellationReason
) -> tuple[tuple[AgentInterrupt, ...], list[EventSpec]]:
    """Remove the turn's pending interrupts, each with an ``interrupt_resolved`` event."""
    remaining: list[AgentInterrupt] = []
    events: list[EventSpec] = []
    for interrupt in pending:
        if interrupt.turn_id != turn_id:
            remaining.append(interrupt)
            continue
        events.append(_interrupt_cancelled(interrupt, reason))
    return tuple(remaining), events


def steer_wake(
    turn_id: str,
    records: Sequence[AgentToolCall],
    pending: Sequence[AgentInterrupt],
    reason: CancellationReason,
) -> SessionChanges:
    """``ResumeTurn`` woke for a steer: drop the turn's interrupts and end every wait.

    Each approval, question and durable wait still waiting gets a
    ``ToolCallCancellations`` message; its own Step then records it ``rejected``.
    A call with a started task is never cancelled by steering.
    """
    changes = SessionChanges()
    task_calls = {record.tool_call_id for record in records if record.task_id is not None}
    # Steering never cancels a task's question: the task runs to its end.
    kept = tuple(i for i in pending if i.tool_call_id in task_calls)
    droppable = tuple(i for i in pending if i.tool_call_id not in task_calls)
    remaining, events = drop_turn_interrupts(droppable, turn_id, reason)
    if len(remaining) != len(droppable):
        changes.pending_interrupts = (*remaining, *kept)
    changes.events.extend(events)
    for record in records:
        if record.status in WAITING_STATUSES and record.task_id is None:
            changes.tool_call_cancellations[record.tool_call_id] = reason
    return changes


@dataclass(frozen=True)
class CancellationOutcome:
    """``apply_turn_control``: the model call was cancelled, so end the turn now.

    ``abandoned_tasks``: tool call IDs whose started task ``CancelToolTask`` abandons.
    """

    changes: SessionChanges
    apply_turn_control: bool = False
    abandoned_tasks: tuple[str, ...] = ()


def finish_turn_cancellation(
    state: AgentState | None,
    turn_id: str,
    records: Sequence[AgentToolCall],
    pending: Sequence[AgentInterrupt],
) -> CancellationOutcome:
    """After ``cancel_turn``: end the turn, or reject every call whose wait was cancelled.

    While the model runs (or compacts), ``cancel_turn`` cancelled that Step, so the turn
    ends in ``ApplyTurnControl``. While tools run, each waiting call records
    ``rejected`` and each started task goes to ``CancelToolTask``; ``ResumeTurn`` ends
    the turn once every call is final.
    """
    changes = SessionChanges()
    if state is None or state.active_turn_id != turn_id:
        return CancellationOutcome(changes)
    remaining, events = drop_turn_interrupts(pending, turn_id, TURN_CANCELLED)
    if len(remaining) != len(pending):
        changes.pending_interrupts = remaining
    changes.events.extend(events)
    if state.status is not AgentStatus.RUNNING_TOOLS:
        return CancellationOutcome(changes, apply_turn_control=True)
    abandoned: list[str] = []
    for record in records:
        if record.is_final:
            continue
        if record.task_id is not None:
            abandoned.append(record.tool_call_id)
        elif record.status in WAITING_STATUSES:
            changes.merge(cancel_waiting_call(record, TURN_CANCELLED))
    return CancellationOutcome(changes, abandoned_tasks=tuple(abandoned))


def end_controlled_turn(
    state: AgentState,
    control: TurnControl,
    *,
    steered_message_count: int,
    records: Sequence[AgentToolCall],
    pending_interrupts: Sequence[AgentInterrupt],
    reply_sequence: TurnReplySequence | None,
    stored_messages: Sequence[AgentMessage],
    closing_messages: Sequence[FrameworkMessage],
) -> SessionChanges:
    """End the active turn as steered or cancelled.

    ``closing_messages`` are the runner's unfinished-turn messages or the note; the
    turn's records, run state and interrupts go, and ``turn_steered`` or
    ``turn_cancelled`` is written.
    """
    turn_id = state.active_turn_id
    if turn_id is None or control.reason is None:
        raise ValueError("only an active steered or cancelled turn can end this way")
    changes = SessionChanges()
    sequence = state.message_count
    for message in closing_messages:
        sequence += 1
        changes.appended_messages.append(
            AgentMessage.from_framework_message(message, sequence=sequence, turn_id=turn_id)
        )
    ended = replace(
        state,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        message_count=sequence,
    )
    changes.state = ended
    changes.set_framework_run_state(None)
    changes.deleted_record_ids.extend(record.tool_call_id for record in records)
    remaining = tuple(interrupt for interrupt in pending_interrupts if interrupt.turn_id != turn_id)
    if len(remaining) != len(pending_interrupts):
        changes.pending_interrupts = remaining
    message_count = turn_message_count(ended, turn_id, reply_sequence, stored_messages)
    if control.cancelled:
        changes.event("turn_cancelled", message_count=message_count)
    else:
        changes.event(
            "turn_steered",
            steered_message_count=steered_message_count,
            message_count=message_count,
        )
    return changes


def start_turn_with_messages(
    state: AgentState, user_messages: Sequence[FrameworkMessage], mode: InteractionMode
) -> tuple[SessionChanges, str]:
    """Start a turn whose user messages are ``user_messages``, in order (a steered turn)."""
    if not user_messages:
        raise ValueError("a turn needs at least one user message")
    first, *rest = user_messages
    changes, turn_id = start_turn(state, first, mode)
    assert changes.state is not None
    started = changes.state
    sequence = started.message_count
    for message in rest:
        sequence += 1
        changes.appended_messages.append(
            AgentMessage.from_framework_message(message, sequence=sequence, turn_id=turn_id)
        )
    changes.state = replace(started, message_count=sequence)
    changes.reply_sequence = TurnReplySequence(turn_id=turn_id, sequence=sequence + 1)
    return changes, turn_id
