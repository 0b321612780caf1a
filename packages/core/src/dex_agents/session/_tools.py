"""Tool Steps: ``CallTool`` and ``CallSingleAttemptTool`` (failure routes: ``_failure_routes``).

Each Step gets the tool call ID as its input and loads only that call's
``AgentToolCalls`` instance, through per-movement options, so parallel tool Steps
share no state. A Step whose record is already final ends without running.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from dex import (
    AsyncContext,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    dead_end,
    go_to_many,
)

from dex_agents._contract import (
    DeferredToolExecution,
    RunnerDefectError,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
    supports_tool_task_polling,
)
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.session._changes import SessionChanges
from dex_agents.session._events import SessionEventWriter
from dex_agents.session._failure_routes import (
    RecordToolFailure,
    RecordToolOutcomeUnknown,
    record_options,
)
from dex_agents.session._heartbeats import BackgroundHeartbeats
from dex_agents.session._moves import poll_movement, question_movement
from dex_agents.session._question_rules import record_tool_question
from dex_agents.session._routing import ToolStepKind
from dex_agents.session._store import (
    SessionDefinition,
    apply_changes,
    commit_changes,
    read_record,
)
from dex_agents.session._tool_rules import finish_tool_call, idempotency_key
from dex_agents.session._tool_task_rules import missing_poller, start_task
from dex_agents.session._tracing_hooks import tool_call_span
from dex_agents.session._wait_cancellation import cancelled_wait

__all__ = [
    "CallSingleAttemptTool",
    "CallTool",
    "ContextCancellation",
    "previous_heartbeat_checkpoint",
    "tool_step_movement",
]

TOOL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
TOOL_METHOD_TIMEOUT = timedelta(hours=2)
CALL_TOOL_ATTEMPTS = 3


class ContextCancellation:
    """``CancellationSignal`` backed by the Step's Dex Context."""

    def __init__(self, context: AsyncContext) -> None:
        self._context = context

    def is_cancelled(self) -> bool:
        return self._context.is_cancellation_requested()


def previous_heartbeat_checkpoint(context: AsyncContext) -> str | None:
    """The checkpoint an earlier attempt saved, when it is text."""
    try:
        if not context.has_last_heartbeat_value():
            return None
        value = context.get_last_heartbeat_value(str)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, str) else None


def tool_step_options(
    session: SessionDefinition, kind: ToolStepKind, tool_call_id: str
) -> StepOptions:
    """Per-movement options of a tool Step: attempts, timeouts, failure route, one record."""
    records = session.persistence.agent_tool_calls
    single = kind is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL
    options = StepOptions(
        execute_method_timeout=TOOL_METHOD_TIMEOUT,
        heartbeat_timeout=TOOL_HEARTBEAT_TIMEOUT,
        execute_retry=RetryPolicy(maximum_attempts=1 if single else CALL_TOOL_ATTEMPTS),
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        execute_load_attribute_map_instances=(records.load(tool_call_id),),
    )
    route = RecordToolOutcomeUnknown if single else RecordToolFailure
    return options.on_execute_failure_proceed_to(route, record_options(session, tool_call_id))


def tool_step_movement(
    session: SessionDefinition, kind: ToolStepKind, tool_call_id: str
) -> StepMovement[str]:
    """The movement that runs ``tool_call_id`` in ``CallTool`` or ``CallSingleAttemptTool``."""
    if kind is ToolStepKind.CALL_TOOL:
        return StepMovement[str](
            CallTool, tool_call_id, tool_step_options(session, kind, tool_call_id)
        )
    if kind is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL:
        return StepMovement[str](
            CallSingleAttemptTool,
            tool_call_id,
            tool_step_options(session, kind, tool_call_id),
        )
    raise ValueError(f"{kind.value} is not a tool Step")


class _ToolStep(Step[str]):
    """Runs one approved call through the runner and records its result."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        # Reached only without per-movement options; keep SYNC durability even then.
        return StepOptions(
            execute_durability=StepDurability.SYNC, wait_for_durability=StepDurability.SYNC
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is not AgentToolCallStatus.APPROVED:
            raise RuntimeError(
                f"tool call {record.tool_call_id} is {record.status.value}, not approved"
            )
        # Only a first attempt can still be "not started": a retry runs to the end.
        cancelled = cancelled_wait(context, persistence, record) if context.attempt == 1 else None
        if cancelled is not None:
            # Steered or cancelled before tool_call_started: the tool never runs.
            commit_changes(context, persistence, cancelled, turn_id=record.turn_id)
            return dead_end()
        events = SessionEventWriter(context, persistence.agent_events, turn_id=record.turn_id)
        try:
            changes = await self._run(context, record, events)
            apply_changes(context, persistence, changes, events)
        finally:
            events.close()
        statuses = {r.status for r in changes.written_records}
        if AgentToolCallStatus.AWAITING_ANSWER in statuses:
            return go_to_many(question_movement(session, record.tool_call_id))
        if AgentToolCallStatus.WAITING_FOR_TASK in statuses:
            return go_to_many(poll_movement(session, record))
        return dead_end()

    async def _run(
        self, context: AsyncContext, record: AgentToolCall, events: SessionEventWriter
    ) -> SessionChanges:
        events.write_tool_call_started(record.tool_call_id, record.tool_name)
        heartbeats = BackgroundHeartbeats(
            context, checkpoint=previous_heartbeat_checkpoint(context)
        )
        # Output before the tool runs: a crash from here on fails this attempt instead of
        # letting Dex hand the same attempt number out again as never started. The
        # tool_call_started event is such output; a heartbeat only when it was dropped
        # (a heartbeat costs the engine a commit). Either way the output is queued
        # before the tool starts, and handed to the sender at the next await.
        if events.written:
            await asyncio.sleep(0)
        else:
            await heartbeats.beat()
        execution = DeferredToolExecution(
            flow_id=context.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(context.flow_id, record),
            attempt=context.attempt,
            events=events,
            cancellation=ContextCancellation(context),
            deadline=datetime.now(UTC) + TOOL_METHOD_TIMEOUT,
            heartbeat=heartbeats.beat,
            heartbeat_checkpoint=heartbeats.checkpoint,
            save_heartbeat_checkpoint=heartbeats.save_checkpoint,
            input_answers=record.input_answers,
            supports_tool_tasks=supports_tool_task_polling(self._session.runner),
        )
        span = tool_call_span(context, self._session, type(self).__name__, record)
        try:
            async with span, heartbeats:
                outcome = await self._session.runner.execute_deferred_tool_call(execution)
                span.result = getattr(outcome, "output", None)
        except ToolExecutionError as error:
            return finish_tool_call(record, AgentToolCallStatus.FAILED, error=error.message)
        if isinstance(outcome, ToolExecutionResult):
            if not isinstance(outcome.output, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise RunnerDefectError(
                    f"runner defect: the output of tool call {record.tool_call_id} must be text"
                )
            return finish_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=outcome.output)
        if isinstance(outcome, ToolInputRequested):
            changes = SessionChanges()
            changes.written_records.append(record_tool_question(record, outcome))
            return changes
        if isinstance(outcome, ToolTaskStarted):  # pyright: ignore[reportUnnecessaryIsInstance]
            if not supports_tool_task_polling(self._session.runner):
                return missing_poller(record)
            # PollToolTask checks for a cancelled turn before its first poll.
            return start_task(record, outcome)
        raise RunnerDefectError(
            "runner defect: execute_deferred_tool_call must return ToolExecutionResult, "
            f"ToolInputRequested or ToolTaskStarted, got {type(outcome).__name__}"
        )


class CallTool(_ToolStep):
    """A ``read`` or ``idempotent_write`` call: up to 3 attempts, then ``RecordToolFailure``."""


class CallSingleAttemptTool(_ToolStep):
    """A ``non_idempotent_write`` or ``unclassified`` call: one attempt only."""
