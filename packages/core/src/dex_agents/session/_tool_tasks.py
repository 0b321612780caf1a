"""Tool task Steps: ``PollToolTask`` and ``CancelToolTask``.

A tool that returned ``ToolTaskStarted`` left its record ``waiting_for_task``; no Step
holds a Worker slot while the remote work runs. ``PollToolTask`` waits on a Timer and
calls the runner's ``poll_tool_task`` once per execution; ``CancelToolTask`` runs when
``cancel_turn`` abandons the task. The rules are in ``tool_task_rules.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import cast

from dex import (
    AsyncContext,
    RetryPolicy,
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

from dex_agents._contract import (
    ToolExecutionError,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    supports_tool_task_polling,
)
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.session._changes import SessionChanges
from dex_agents.session._control_reads import is_turn_cancelled
from dex_agents.session._events import SessionEventWriter
from dex_agents.session._failure_routes import RecordToolOutcomeUnknown, record_options
from dex_agents.session._heartbeats import BackgroundHeartbeats
from dex_agents.session._moves import POLL_METHOD_TIMEOUT, poll_movement, question_movement
from dex_agents.session._store import (
    SessionDefinition,
    apply_changes,
    commit_changes,
    read_record,
)
from dex_agents.session._tool_rules import finish_tool_call, idempotency_key
from dex_agents.session._tool_task_rules import (
    PollNext,
    abandon_task,
    apply_poll_outcome,
    missing_poller,
    poll_wait_seconds,
    task_question_answer,
)
from dex_agents.session._tools import ContextCancellation
from dex_agents.session._tracing_hooks import tool_call_span

__all__ = [
    "TOOL_TASK_POLL_TIMER_ID",
    "CancelToolTask",
    "PollToolTask",
    "cancel_task_movement",
]

TOOL_TASK_POLL_TIMER_ID = "tool_task_poll"
"""Condition ID of the poll Timer, for ``Client.skip_timer``."""

CANCEL_METHOD_TIMEOUT = timedelta(seconds=30)
CANCEL_RETRY = RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=2))


def cancel_task_movement(session: SessionDefinition, tool_call_id: str) -> StepMovement[str]:
    """The movement into ``CancelToolTask``: 30 s, 3 attempts within 2 min, then by effect."""
    records = session.persistence.agent_tool_calls
    options = StepOptions(
        execute_method_timeout=CANCEL_METHOD_TIMEOUT,
        execute_retry=CANCEL_RETRY,
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        execute_load_attribute_map_instances=(records.load(tool_call_id),),
    )
    return StepMovement[str](
        CancelToolTask,
        tool_call_id,
        options.on_execute_failure_proceed_to(
            RecordToolOutcomeUnknown, record_options(session, tool_call_id)
        ),
    )


Poller = Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]]


def _poller(runner: object) -> Poller | None:
    if not supports_tool_task_polling(runner):
        return None
    return cast("Poller", getattr(runner, "poll_tool_task", None))


class PollToolTask(Step[str]):
    """Waits for the poll interval (or at once with a pending answer), then polls once."""

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
        if record is None or record.status is not AgentToolCallStatus.WAITING_FOR_TASK:
            return Wait.skip_immediately()
        seconds = poll_wait_seconds(record)
        return Wait.any_of(
            Timer.by_duration(timedelta(seconds=seconds), condition_id=TOOL_TASK_POLL_TIMER_ID)
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.status is not AgentToolCallStatus.WAITING_FOR_TASK:
            return dead_end()
        if is_turn_cancelled(context, persistence, record.turn_id):
            return go_to_many(cancel_task_movement(session, input))
        poll_tool_task = _poller(session.runner)
        if poll_tool_task is None:
            # A Worker of this Flow type without the poller (a rollout): record by effect.
            commit_changes(context, persistence, missing_poller(record), turn_id=record.turn_id)
            return dead_end()
        events = SessionEventWriter(context, persistence.agent_events, turn_id=record.turn_id)
        try:
            changes, next_step = await self._poll(context, record, events, poll_tool_task)
            if is_turn_cancelled(context, persistence, record.turn_id):
                # cancel_turn abandoned the task while it was polled: drop the result.
                return go_to_many(cancel_task_movement(session, input))
            apply_changes(context, persistence, changes, events)
        finally:
            events.close()
        if next_step is PollNext.POLL_AGAIN:
            return go_to_many(poll_movement(session, record))
        if next_step is PollNext.ASK:
            return go_to_many(question_movement(session, input))
        return dead_end()

    async def _poll(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        events: SessionEventWriter,
        poll_tool_task: Poller,
    ) -> tuple[SessionChanges, PollNext]:
        heartbeats = BackgroundHeartbeats(context)
        await heartbeats.beat()
        poll = ToolTaskPoll(
            flow_id=context.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(context.flow_id, record),
            attempt=context.attempt,
            events=events,
            cancellation=ContextCancellation(context),
            deadline=datetime.now(UTC) + POLL_METHOD_TIMEOUT,
            pending_answer=task_question_answer(record),
        )
        span = tool_call_span(context, self._session, type(self).__name__, record)
        try:
            async with span, heartbeats:
                outcome = await poll_tool_task(poll)
                span.result = getattr(outcome, "output", None)
        except ToolExecutionError as error:
            changes = finish_tool_call(record, AgentToolCallStatus.FAILED, error=error.message)
            return changes, PollNext.DONE
        result = apply_poll_outcome(record, outcome)
        return result.changes, result.next


class CancelToolTask(Step[str]):
    """``cancel_turn`` abandoned a started task: ask the runner to stop it, then record it."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
            execute_load_attribute_maps=(self._session.persistence.agent_tool_calls,),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return dead_end()
        cancel_tool_task = getattr(self._session.runner, "cancel_tool_task", None)
        if callable(cancel_tool_task) and record.task_id is not None:
            cancel = cast("Callable[[ToolTaskCancellation], Awaitable[None]]", cancel_tool_task)
            await cancel(
                ToolTaskCancellation(
                    flow_id=context.flow_id,
                    tool_call=record,
                    idempotency_key=idempotency_key(context.flow_id, record),
                    attempt=context.attempt,
                )
            )
        commit_changes(context, persistence, abandon_task(record), turn_id=record.turn_id)
        return dead_end()
