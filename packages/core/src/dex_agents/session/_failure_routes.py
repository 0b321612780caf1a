"""The failure routes of tool Steps: ``RecordToolFailure`` and ``RecordToolOutcomeUnknown``.

A tool Step (``CallTool``, ``CallSingleAttemptTool``, ``PollToolTask``,
``CancelToolTask``) whose attempts are spent proceeds to one of these with the call ID:
it records the call's final status and ends. They move nowhere, so every tool Step
module builds on them. The rule is ``tool_rules.record_failure_route``.
"""

from __future__ import annotations

from datetime import timedelta

from dex import AsyncContext, RetryPolicy, Step, StepDecision, StepDurability, StepOptions, dead_end

from dex_agents._attempt_progress import StepAttemptProgress, recovery_attempt_progress
from dex_agents.session._control_reads import is_turn_cancelled
from dex_agents.session._store import SessionDefinition, commit_changes, read_record
from dex_agents.session._tool_rules import record_failure_route
from dex_agents.session._tool_task_rules import abandon_task

__all__ = ["RECORD_RETRY", "RecordToolFailure", "RecordToolOutcomeUnknown", "record_options"]

RECORD_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5))
"""Retries of a Step that only records: capped backoff, no attempt limit."""


def record_options(session: SessionDefinition, tool_call_id: str) -> StepOptions:
    """Options of a failure route: only this call's record, short capped backoff."""
    records = session.persistence.agent_tool_calls
    return StepOptions(
        execute_retry=RECORD_RETRY,
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        execute_load_attribute_map_instances=(records.load(tool_call_id),),
    )


class _RecordFailure(Step[str]):
    outcome_unknown_always = False

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_retry=RECORD_RETRY,
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return dead_end()
        if record.task_id is not None and is_turn_cancelled(context, persistence, record.turn_id):
            # CancelToolTask kept failing: the abandoned task is still recorded as such.
            changes = abandon_task(record)
        else:
            changes = record_failure_route(
                record,
                context.recovery_error,
                outcome_unknown_always=self.outcome_unknown_always,
                never_started=recovery_attempt_progress(context) is StepAttemptProgress.NOT_STARTED,
            )
        commit_changes(context, persistence, changes, turn_id=record.turn_id)
        return dead_end()


class RecordToolFailure(_RecordFailure):
    """Failure route of ``CallTool``: ``failed`` for a read, ``outcome_unknown`` for a write."""


class RecordToolOutcomeUnknown(_RecordFailure):
    """Failure route of ``CallSingleAttemptTool``: always ``outcome_unknown``."""

    outcome_unknown_always = True
