"""Pending interrupts: lookups, deadlines and the payloads of their events (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    InterruptKind,
    parse_timestamp,
)

__all__ = [
    "InterruptDecision",
    "find_interrupt",
    "interrupt_raised_payload",
    "interrupt_resolved_payload",
    "is_past_deadline",
    "timer_seconds_until",
    "without_interrupt",
]


@dataclass(frozen=True)
class InterruptDecision:
    """What ``resolve_interrupt`` or ``answer_question`` does: its answer and, if accepted,
    the pending interrupts left and the resolution to publish."""

    accepted: bool
    pending: tuple[AgentInterrupt, ...] = ()
    resolution: AgentInterruptResolution | None = None


def find_interrupt(pending: Sequence[AgentInterrupt], interrupt_id: str) -> AgentInterrupt | None:
    """The pending interrupt with ``interrupt_id``, or ``None``."""
    for interrupt in pending:
        if interrupt.interrupt_id == interrupt_id:
            return interrupt
    return None


def without_interrupt(
    pending: Sequence[AgentInterrupt], interrupt_id: str
) -> tuple[AgentInterrupt, ...]:
    return tuple(item for item in pending if item.interrupt_id != interrupt_id)


def is_past_deadline(interrupt: AgentInterrupt, now: datetime) -> bool:
    """Whether ``now`` is at or after the interrupt's deadline."""
    return interrupt.deadline is not None and now >= parse_timestamp(interrupt.deadline)


def timer_seconds_until(moment: datetime, now: datetime) -> int:
    """Whole seconds from ``now`` to ``moment``, rounded up (Dex Timers take whole seconds)."""
    return max(0, math.ceil((moment - now) / timedelta(seconds=1)))


def interrupt_raised_payload(interrupt: AgentInterrupt) -> Mapping[str, Any]:
    """The ``interrupt_raised`` payload of ``interrupt``."""
    return {
        "interrupt_id": interrupt.interrupt_id,
        "kind": interrupt.kind.value,
        "tool_call_id": interrupt.tool_call_id,
        "tool_name": interrupt.tool_name,
        "deadline": interrupt.deadline,
        "question": interrupt.question,
        "choices": list(interrupt.choices) if interrupt.choices is not None else None,
        "allows_free_text": interrupt.allows_free_text,
    }


def interrupt_resolved_payload(
    interrupt_id: str,
    kind: InterruptKind,
    *,
    approved: bool,
    answered: bool = False,
    rejection_message: str | None = None,
    cancellation_reason: str | None = None,
) -> dict[str, object]:
    """The ``interrupt_resolved`` payload."""
    return {
        "interrupt_id": interrupt_id,
        "kind": kind.value,
        "approved": approved,
        "answered": answered,
        "rejection_message": rejection_message,
        "cancellation_reason": cancellation_reason,
    }
