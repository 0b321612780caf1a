"""How a waiting Step (approval, question, durable wait) or a tool Step that has not
started notices that its turn was steered or cancelled."""

from __future__ import annotations

from collections.abc import Sequence

from dex import Context
from dex.condition import Condition

from dex_agents._values import AgentInterrupt, AgentToolCall
from dex_agents.session._changes import SessionChanges
from dex_agents.session._control_reads import read_turn_control
from dex_agents.session._persistence import SessionPersistence
from dex_agents.session._turn_control_rules import cancel_wait

__all__ = ["cancellation_condition", "cancelled_wait"]


def cancellation_condition(persistence: SessionPersistence, tool_call_id: str) -> Condition:
    """The call's ``ToolCallCancellations`` instance: a steer ends the wait through it."""
    return persistence.tool_call_cancellations.for_one(tool_call_id)


def cancelled_wait(
    context: Context,
    persistence: SessionPersistence,
    record: AgentToolCall,
    pending: Sequence[AgentInterrupt] = (),
) -> SessionChanges | None:
    """The changes that reject ``record`` when its turn is steered or cancelled, else ``None``.

    The turn's own state decides, not the wake: a stale ``ToolCallCancellations`` message
    of an earlier turn with the same tool call ID cancels nothing.
    """
    if record.is_final or record.task_id is not None:
        # A started task is never rejected: steering waits for it, cancel_turn abandons it.
        return None
    reason = read_turn_control(context, persistence, record.turn_id).reason
    if reason is None:
        return None
    return cancel_wait(record, reason, pending)
