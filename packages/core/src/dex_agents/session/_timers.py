"""``AwaitTimer``: a ``durable_wait`` call waits on a Dex Timer until its ``wait_until``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)

from dex_agents._values import AgentToolCall, AgentToolCallStatus, parse_timestamp
from dex_agents.session._builtin_rules import durable_wait_output
from dex_agents.session._interrupts import timer_seconds_until
from dex_agents.session._store import (
    SessionDefinition,
    commit_changes,
    read_record,
)
from dex_agents.session._tool_rules import finish_tool_call
from dex_agents.session._wait_cancellation import cancellation_condition, cancelled_wait

__all__ = ["DURABLE_WAIT_TIMER_ID", "AwaitTimer", "timer_movement"]

DURABLE_WAIT_TIMER_ID = "durable_wait"
"""Condition ID of the wait's Timer, for ``Client.skip_timer``."""


def timer_options(session: SessionDefinition, tool_call_id: str) -> StepOptions:
    records = session.persistence.agent_tool_calls
    return StepOptions(
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        wait_for_load_attribute_map_instances=(records.load(tool_call_id),),
        execute_load_attribute_map_instances=(records.load(tool_call_id),),
    )


def timer_movement(session: SessionDefinition, tool_call_id: str) -> StepMovement[str]:
    return StepMovement[str](AwaitTimer, tool_call_id, timer_options(session, tool_call_id))


def _wait_arguments(record: AgentToolCall) -> tuple[int, str]:
    """The validated ``duration_seconds`` and ``reason`` that RunModel stored."""
    data = cast("dict[str, Any]", json.loads(record.arguments))
    duration = data.get("duration_seconds")
    reason = data.get("reason")
    return int(cast("int | float", duration)), reason if isinstance(reason, str) else ""


class AwaitTimer(Step[str]):
    """Waits until the record's ``wait_until`` (or a SkipTimer), then records ``succeeded``."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        records = self._session.persistence.agent_tool_calls
        return StepOptions(
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
            wait_for_load_attribute_maps=(records,),
            execute_load_attribute_maps=(records,),
        )

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        record = read_record(context, self._session.persistence, input)
        if record is None or record.is_final or record.wait_until is None:
            return Wait.skip_immediately()
        seconds = timer_seconds_until(parse_timestamp(record.wait_until), datetime.now(UTC))
        persistence = self._session.persistence
        # Timers come first among ready conditions, so a wait that is due keeps its result.
        return Wait.any_of(
            Timer.by_duration(timedelta(seconds=seconds), condition_id=DURABLE_WAIT_TIMER_ID),
            cancellation_condition(persistence, input),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return dead_end()
        if not context.has_timer_fired():
            cancelled = cancelled_wait(context, persistence, record)
            if cancelled is None:
                # A stale wake of an earlier turn's call with this ID: wait again.
                return go_to_many(timer_movement(self._session, input))
            commit_changes(context, persistence, cancelled, turn_id=record.turn_id)
            return dead_end()
        duration, reason = _wait_arguments(record)
        changes = finish_tool_call(
            record, AgentToolCallStatus.SUCCEEDED, output=durable_wait_output(duration, reason)
        )
        commit_changes(context, persistence, changes, turn_id=record.turn_id)
        return dead_end()
