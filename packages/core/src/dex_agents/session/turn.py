"""Turn Steps: ``StartAgentSession``, ``AwaitUserMessage``, ``RunModel``, ``ResumeTurn``,
``RecordTurnFailure``. The rules live in ``turn_rules``; these Steps read, call the
runner, and apply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dex import (
    AsyncContext,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    Wait,
    go_to,
    go_to_many,
)

from dex_agents.runner import AgentTurnContext, SupportsUnfinishedTurnMessages
from dex_agents.session.approvals import approval_movement
from dex_agents.session.events import SessionEventWriter
from dex_agents.session.heartbeats import BackgroundHeartbeats
from dex_agents.session.questions import question_movement
from dex_agents.session.routing import ToolStepKind, TurnRouting
from dex_agents.session.store import (
    SessionDefinition,
    apply_changes,
    commit_changes,
    read_messages,
    read_pending_interrupts,
    read_records,
    read_reply_sequence,
    read_run_state,
    read_state,
    read_usage,
)
from dex_agents.session.timers import timer_movement
from dex_agents.session.tool_rules import open_record_count, recovery_error_text
from dex_agents.session.tools import ContextCancellation, tool_step_movement
from dex_agents.session.tracing_hooks import (
    model_call_span,
    read_trace_context,
    trace_activation,
)
from dex_agents.session.turn_rules import apply_model_outcome, fail_turn, start_turn
from dex_agents.texts import build_turn_failure_note
from dex_agents.values import (
    AgentMessage,
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentUsage,
    FrameworkMessage,
)

__all__ = [
    "AwaitUserMessage",
    "RecordTurnFailure",
    "ResumeTurn",
    "RunModel",
    "StartAgentSession",
    "route",
]

_log = logging.getLogger(__name__)

MODEL_METHOD_TIMEOUT = timedelta(minutes=15)
MODEL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
MODEL_RETRY = RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=30))
RECORD_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5))


def route(session: SessionDefinition, routing: TurnRouting) -> StepDecision:
    """The Dex decision for ``routing``."""
    if routing.tool_steps:
        movements: list[StepMovement[Any]] = []
        for move in routing.tool_steps:
            if move.kind is ToolStepKind.AWAIT_APPROVAL:
                movements.append(approval_movement(session, move.tool_call_id))
            elif move.kind is ToolStepKind.AWAIT_QUESTION:
                movements.append(question_movement(session, move.tool_call_id))
            elif move.kind is ToolStepKind.AWAIT_TIMER:
                movements.append(timer_movement(session, move.tool_call_id))
            else:
                movements.append(tool_step_movement(session, move.kind, move.tool_call_id))
        movements.append(StepMovement[int](ResumeTurn, routing.resume_count))
        return go_to_many(*movements)
    if routing.run_model:
        return go_to(RunModel, None)
    return go_to(AwaitUserMessage, None)


class _SessionStep:
    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def _writer(self, context: AsyncContext, turn_id: str) -> SessionEventWriter:
        return SessionEventWriter(context, self._session.persistence.agent_events, turn_id=turn_id)

    def _start_turn(self, context: AsyncContext, state: AgentState, text: str) -> StepDecision:
        """Store the runner's user message for ``text`` as a new turn and run the model."""
        user_message = self._session.runner.build_user_message(text)
        changes, turn_id = start_turn(state, user_message)
        commit_changes(context, self._session.persistence, changes, turn_id=turn_id)
        trace_activation(context, self._session, type(self).__name__, turn_id)
        return go_to(RunModel, None)

    def _turn_context(
        self,
        context: AsyncContext,
        turn_id: str,
        *,
        messages: Sequence[AgentMessage],
        records: Sequence[AgentToolCall],
        events: SessionEventWriter,
        heartbeat: Callable[[], Awaitable[None]],
    ) -> AgentTurnContext:
        """What the runner sees in this attempt, from committed state only."""
        options = self._session.options
        return AgentTurnContext(
            flow_id=context.flow_id,
            turn_id=turn_id,
            attempt=context.attempt,
            messages=tuple(messages),
            framework_run_state=read_run_state(context, self._session.persistence),
            tool_calls=tuple(records),
            events=events,
            cancellation=ContextCancellation(context),
            deadline=datetime.now(UTC) + MODEL_METHOD_TIMEOUT,
            step_execution_id=context.step_execution_id,
            tool_policies=options.tool_policies,
            default_tool_effect=options.default_tool_effect,
            heartbeat=heartbeat,
            enabled_built_in_tools=options.built_in_tools,
        )


class StartAgentSession(_SessionStep, Step[AgentSessionStartInput]):
    """Initializes the session; starts ``turn-1`` when an initial message is set."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_durability=StepDurability.SYNC, wait_for_durability=StepDurability.SYNC
        )

    async def execute(self, context: AsyncContext, input: AgentSessionStartInput) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        state = read_state(context, persistence) or AgentState()
        persistence.agent_state.set(context, state)
        if read_usage(context, persistence) == AgentUsage():
            persistence.agent_usage.set(context, AgentUsage())
        persistence.pending_interrupts.set(context, read_pending_interrupts(context, persistence))
        text = input.initial_message
        if text is None or not text.strip() or state.active_turn_id is not None:
            return go_to(AwaitUserMessage, None)
        return self._start_turn(context, state, text)


class AwaitUserMessage(_SessionStep, Step[None]):
    """Waits for one queued user message and starts a turn with it."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_durability=StepDurability.SYNC, wait_for_durability=StepDurability.SYNC
        )

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        return Wait.until(self._session.persistence.queued_user_messages.for_one())

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        messages = persistence.queued_user_messages.results(context)
        state = read_state(context, persistence) or AgentState()
        if not messages:
            return go_to(AwaitUserMessage, None)
        if state.active_turn_id is not None:
            raise RuntimeError(
                f"a user message arrived while {state.active_turn_id} is active; "
                "AwaitUserMessage runs only between turns"
            )
        return self._start_turn(context, state, messages[0].text)


class RunModel(_SessionStep, Step[None]):
    """One model call through ``run_model_step``; routes to tools, or ends the turn."""

    def get_step_options(self) -> StepOptions | None:
        persistence = self._session.persistence
        options = StepOptions(
            execute_method_timeout=MODEL_METHOD_TIMEOUT,
            heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
            execute_retry=MODEL_RETRY,
            execute_load_attribute_maps=(persistence.agent_messages, persistence.agent_tool_calls),
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
        )
        return options.on_execute_failure_proceed_to(
            RecordTurnFailure, record_turn_failure_options(self._session)
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        state = read_state(context, persistence)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        turn_id = state.active_turn_id
        messages = read_messages(context, persistence)
        records = read_records(context, persistence)
        events = self._writer(context, turn_id)
        trace_parent = read_trace_context(context, session)
        span = model_call_span(context, session, turn_id, messages, trace_parent)
        try:
            async with span, BackgroundHeartbeats(context) as heartbeats:
                # Output before the model call: Dex hands an attempt that sent nothing back
                # out under the same attempt number, so a crash would neither count against
                # the 3 attempts nor let a UI drop the lost attempt's partial text.
                await heartbeats.beat()
                turn = self._turn_context(
                    context,
                    turn_id,
                    messages=messages,
                    records=records,
                    events=events,
                    heartbeat=heartbeats.beat,
                )
                outcome = await session.runner.run_model_step(turn)
                span.outcome = outcome
            changes, routing = apply_model_outcome(
                state,
                outcome,
                session_usage=read_usage(context, persistence),
                records=records,
                pending_interrupts=read_pending_interrupts(context, persistence),
                reply_sequence=read_reply_sequence(context, persistence),
                stored_messages=messages,
                now=datetime.now(UTC),
                interrupt_deadline=session.options.interrupt_deadline,
                built_in_tools=session.options.built_in_tools,
                max_durable_wait=session.options.max_durable_wait,
                trace_context=trace_parent,
            )
            apply_changes(context, persistence, changes, events)
        finally:
            events.close()
        return route(session, routing)


class ResumeTurn(_SessionStep, Step[int]):
    """Waits for the tool calls' results, re-counts open records, then runs the model again."""

    def get_step_options(self) -> StepOptions | None:
        persistence = self._session.persistence
        return StepOptions(
            execute_lock_attributes=(persistence.pending_interrupts.lock(),),
            execute_load_attribute_maps=(persistence.agent_tool_calls,),
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
        )

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        if input < 1:
            return Wait.skip_immediately()
        return Wait.until(self._session.persistence.tool_call_results.for_n(input))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        still_open = open_record_count(read_records(context, persistence))
        if still_open > 0:
            # A stray completion resumed us early; wait for the calls still running.
            return go_to(ResumeTurn, still_open)
        state = read_state(context, persistence)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        if state.status is not AgentStatus.RUNNING_MODEL:
            persistence.agent_state.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
        return go_to(RunModel, None)


def record_turn_failure_options(session: SessionDefinition) -> StepOptions:
    """Static options of ``RecordTurnFailure``: capped backoff; messages only when needed."""
    persistence = session.persistence
    maps = (
        (persistence.agent_tool_calls, persistence.agent_messages)
        if isinstance(session.runner, SupportsUnfinishedTurnMessages)
        else (persistence.agent_tool_calls,)
    )
    return StepOptions(
        execute_retry=RECORD_RETRY,
        execute_load_attribute_maps=maps,
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
    )


class RecordTurnFailure(_SessionStep, Step[None]):
    """Failure route of ``RunModel``: records ``last_turn_error`` and ends the turn."""

    def get_step_options(self) -> StepOptions | None:
        return record_turn_failure_options(self._session)

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        state = read_state(context, persistence)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        turn_id = state.active_turn_id
        records = read_records(context, persistence)
        events = self._writer(context, turn_id)
        try:
            unfinished = self._unfinished_messages(context, state, records, events)
            note = build_turn_failure_note(records)
            note_message = self._note_message(note) if note is not None else None
            changes, routing = fail_turn(
                state,
                error=recovery_error_text(context.recovery_error),
                records=records,
                pending_interrupts=read_pending_interrupts(context, persistence),
                unfinished_messages=unfinished,
                failure_note=note_message,
            )
            apply_changes(context, persistence, changes, events)
        finally:
            events.close()
        return route(session, routing)

    def _note_message(self, note: str) -> FrameworkMessage | None:
        try:
            message = self._session.runner.build_user_message(note)
        except Exception:
            _log.exception("build_user_message failed for the turn failure note")
            return None
        if not isinstance(message, FrameworkMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
            _log.error("build_user_message returned %s, not a FrameworkMessage", type(message))
            return None
        return message

    def _unfinished_messages(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        events: SessionEventWriter,
    ) -> tuple[FrameworkMessage, ...]:
        runner = self._session.runner
        if not isinstance(runner, SupportsUnfinishedTurnMessages):
            return ()
        persistence = self._session.persistence
        assert state.active_turn_id is not None
        turn = self._turn_context(
            context,
            state.active_turn_id,
            messages=read_messages(context, persistence),
            records=records,
            events=events,
            heartbeat=context.heartbeat,
        )
        try:
            produced = runner.build_unfinished_turn_messages(turn)
            messages = tuple(produced)
        except Exception:
            _log.exception("build_unfinished_turn_messages failed; storing only the note")
            return ()
        if not all(isinstance(message, FrameworkMessage) for message in messages):  # pyright: ignore[reportUnnecessaryIsInstance]
            _log.error("build_unfinished_turn_messages returned a value that is not a message")
            return ()
        return messages
