"""``FinishTurnCancellation``: what ``cancel_turn`` leaves to a Step.

``cancel_turn`` records the request and cancels the running model call and every
waiting Step; this Step, under the same locks, either ends the turn at once (the
model call was cancelled) or records each call whose wait was cancelled as
``rejected``, so that ``ResumeTurn`` ends the turn once every call is final.
"""

from __future__ import annotations

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepDurability,
    StepOptions,
    dead_end,
    go_to_many,
)

from dex_agents.session._failure_routes import RECORD_RETRY
from dex_agents.session._moves import go_to_apply_turn_control
from dex_agents.session._store import (
    SessionDefinition,
    commit_changes,
    read_pending_interrupts,
    read_records,
    read_state,
)
from dex_agents.session._tool_tasks import cancel_task_movement
from dex_agents.session._turn_control_rules import finish_turn_cancellation

__all__ = ["FinishTurnCancellation", "finish_cancellation_options"]


def finish_cancellation_options(session: SessionDefinition) -> StepOptions:
    """Locks ``TurnCancellationRequest`` and ``PendingInterrupts``; capped backoff."""
    persistence = session.persistence
    return StepOptions(
        execute_retry=RECORD_RETRY,
        execute_lock_attributes=(
            persistence.turn_cancellation_request.lock(),
            persistence.pending_interrupts.lock(),
        ),
        execute_load_attribute_maps=(persistence.agent_tool_calls,),
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
    )


class FinishTurnCancellation(Step[str]):
    """Input: the cancelled turn's ID. Ends the turn, or rejects its cancelled waits."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        return finish_cancellation_options(self._session)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        outcome = finish_turn_cancellation(
            read_state(context, persistence),
            input,
            read_records(context, persistence),
            read_pending_interrupts(context, persistence),
        )
        commit_changes(context, persistence, outcome.changes, turn_id=input)
        if outcome.apply_turn_control:
            return go_to_apply_turn_control(self._session, context)
        if outcome.abandoned_tasks:
            session = self._session
            return go_to_many(
                *(cancel_task_movement(session, call_id) for call_id in outcome.abandoned_tasks)
            )
        return dead_end()
