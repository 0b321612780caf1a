"""``AwaitToolApproval``: a call that needs approval waits here for its resolution or deadline."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dex import (
    AsyncContext,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)
from dex import Step as DexStep

from dex_agents.session._approval_rules import (
    ApprovalOutcome,
    apply_approval_resolution,
    apply_approval_timer,
    approval_wait,
)
from dex_agents.session._store import (
    SessionDefinition,
    commit_changes,
    read_pending_interrupts,
    read_record,
)
from dex_agents.session._tools import tool_step_movement
from dex_agents.session._tracing_hooks import trace_activation
from dex_agents.session._wait_cancellation import cancellation_condition, cancelled_wait

__all__ = ["AwaitToolApproval", "approval_movement"]


def approval_options(session: SessionDefinition, tool_call_id: str) -> StepOptions:
    """Locks ``PendingInterrupts`` in Execute; loads only this call's record."""
    persistence = session.persistence
    return StepOptions(
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        execute_lock_attributes=(persistence.pending_interrupts.lock(),),
        execute_load_attribute_map_instances=(persistence.agent_tool_calls.load(tool_call_id),),
    )


def approval_movement(session: SessionDefinition, tool_call_id: str) -> StepMovement[str]:
    """The movement that waits for the approval of ``tool_call_id``."""
    return StepMovement[str](
        AwaitToolApproval, tool_call_id, approval_options(session, tool_call_id)
    )


class AwaitToolApproval(DexStep[str]):
    """Waits for ``InterruptResolutions[<id>]`` or the deadline Timer, then routes the call."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        persistence = self._session.persistence
        return StepOptions(
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
            execute_lock_attributes=(persistence.pending_interrupts.lock(),),
        )

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        pending = read_pending_interrupts(context, persistence)
        resolution = persistence.interrupt_resolutions.for_one(input)
        cancellation = cancellation_condition(persistence, input)
        plan = approval_wait(pending, input, datetime.now(UTC))
        if plan.timer_seconds is None:
            return Wait.any_of(resolution, cancellation)
        return Wait.any_of(
            Timer.by_duration(timedelta(seconds=plan.timer_seconds)), resolution, cancellation
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        record = read_record(context, persistence, input)
        if record is None:
            return dead_end()
        resolutions = persistence.interrupt_resolutions.results(context, input)
        cancelled = cancelled_wait(
            context, persistence, record, read_pending_interrupts(context, persistence)
        )
        if resolutions:
            outcome = apply_approval_resolution(record, resolutions[0])
        elif cancelled is not None:
            outcome = ApprovalOutcome(cancelled)
        else:
            pending = read_pending_interrupts(context, persistence)
            outcome = apply_approval_timer(record, pending, datetime.now(UTC))
        if not outcome.wait_again:  # an answer or a passed deadline starts an activation
            root = trace_activation(context, session, "AwaitToolApproval", record.turn_id)
            written = outcome.changes.written_records
            written[:] = [replace(r, trace_context=root) for r in written]
        commit_changes(context, persistence, outcome.changes, turn_id=record.turn_id)
        if outcome.next_step is not None:
            return go_to_many(tool_step_movement(session, outcome.next_step, input))
        if outcome.wait_again:
            return go_to_many(approval_movement(session, input))
        return dead_end()
