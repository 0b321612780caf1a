"""Turn Steps: ``StartAgentSession``, ``AwaitUserMessage``, ``RunModel``, ``ResumeTurn``,
``RecordTurnFailure``. The rules live in ``turn_rules``; these Steps read, call the
runner, and apply.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
    force_fail,
    go_to,
    go_to_many,
)

from dex_agents._builtin_tools import WRITE_TODOS
from dex_agents._compaction import (
    SupportsCompaction,
    compaction_cutoff_is_new,
    start_compaction,
)
from dex_agents._contract import AgentTurnContext, SupportsUnfinishedTurnMessages
from dex_agents._plans import interaction_mode_for_turn, plan_updated_payload
from dex_agents._session_settings import (
    INVALID_START_SESSION_SETTINGS_REASON,
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    SessionSettingsStorageError,
    read_session_settings,
    session_settings_error,
    store_session_settings,
    turn_settings,
)
from dex_agents._texts import build_turn_failure_note, plan_execution_user_text
from dex_agents._values import (
    AgentMessage,
    AgentPlan,
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentUsage,
    CompactContextInput,
    ContextSummary,
    FrameworkMessage,
    InteractionMode,
    TurnSessionSettings,
    plan_execution_key,
)
from dex_agents.session._approvals import approval_movement
from dex_agents.session._control_reads import read_plan, read_turn_control
from dex_agents.session._events import SessionEventWriter
from dex_agents.session._failure_routes import RECORD_RETRY
from dex_agents.session._heartbeats import BackgroundHeartbeats
from dex_agents.session._moves import (
    go_to_apply_turn_control,
    go_to_model_input_step,
    model_input_chunk_keys,
    question_movement,
)
from dex_agents.session._plan_rules import activate_plan, is_current_plan_execution
from dex_agents.session._routing import ToolStepKind, TurnRouting
from dex_agents.session._store import (
    SessionDefinition,
    apply_changes,
    commit_changes,
    read_context_summary,
    read_message_index,
    read_messages,
    read_optional,
    read_pending_interrupts,
    read_records,
    read_reply_sequence,
    read_run_state,
    read_state,
    read_usage,
)
from dex_agents.session._timers import timer_movement
from dex_agents.session._tool_rules import open_record_count, recovery_error_text
from dex_agents.session._tools import ContextCancellation, tool_step_movement
from dex_agents.session._tracing_hooks import (
    model_call_span,
    read_trace_context,
    trace_activation,
)
from dex_agents.session._turn_control_rules import steer_wake
from dex_agents.session._turn_rules import apply_model_outcome, fail_turn, start_turn

__all__ = [
    "AwaitUserMessage",
    "RecordTurnFailure",
    "ResumeTurn",
    "RunModel",
    "SessionStep",
    "StartAgentSession",
    "go_to_run_model",
    "model_step_options",
    "route",
]

_log = logging.getLogger(__name__)

MODEL_METHOD_TIMEOUT = timedelta(minutes=15)
MODEL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
MODEL_RETRY = RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=30))


def model_input_start(session: SessionDefinition, summary: ContextSummary | None) -> int | None:
    """The sequence the model input starts after: the summary's last, for a runner that
    reads the summary; ``None`` (every stored message) otherwise."""
    if summary is None or not isinstance(session.runner, SupportsCompaction):
        return None
    return summary.last_sequence


def model_step_options(session: SessionDefinition, chunk_keys: Sequence[str] | None) -> StepOptions:
    """Options of ``RunModel`` and ``CompactContext``: the window, the turn's records, and
    the chunks ``chunk_keys`` names (every chunk for ``None``)."""
    persistence = session.persistence
    maps = (persistence.agent_messages, persistence.agent_tool_calls)
    chunks = persistence.agent_message_chunks
    options = StepOptions(
        execute_method_timeout=MODEL_METHOD_TIMEOUT,
        heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
        execute_retry=MODEL_RETRY,
        execute_load_attribute_maps=maps if chunk_keys is not None else (*maps, chunks),
        execute_load_attribute_map_instances=tuple(chunks.load(key) for key in chunk_keys or ()),
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
    )
    return options.on_execute_failure_proceed_to(
        RecordTurnFailure, record_turn_failure_options(session)
    )


def go_to_run_model(session: SessionDefinition, context: AsyncContext) -> StepDecision:
    """Move to ``RunModel`` loading only the chunks its input needs (after this commit)."""
    return go_to_model_input_step(session, context, RunModel, model_step_options)


def route(
    session: SessionDefinition, routing: TurnRouting, context: AsyncContext | None = None
) -> StepDecision:
    """The Dex decision for ``routing``; with ``context``, ``RunModel`` loads only the
    chunks its input needs."""
    if routing.apply_turn_control:
        return go_to_apply_turn_control(session, context)
    if routing.tool_steps or routing.resume_count:
        # Every call may be final already (write_todos, a planning turn): ResumeTurn still runs.
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
        return go_to_run_model(session, context) if context is not None else go_to(RunModel, None)
    return go_to(AwaitUserMessage, None)


class _SessionStep:
    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def _writer(self, context: AsyncContext, turn_id: str) -> SessionEventWriter:
        return SessionEventWriter(context, self._session.persistence.agent_events, turn_id=turn_id)

    def _start_turn(
        self,
        context: AsyncContext,
        state: AgentState,
        text: str,
        *,
        settings: Mapping[str, Any] | None = None,
        interaction_mode: InteractionMode = InteractionMode.CHAT,
    ) -> StepDecision:
        """Store the runner's user message for ``text`` as a new turn and run the model.

        The turn keeps a copy of the session settings (``settings``, else the stored
        ones), so an update during the turn takes effect at the next one.
        """
        persistence = self._session.persistence
        user_message = self._session.runner.build_user_message(text)
        changes, turn_id = start_turn(state, user_message, interaction_mode)
        commit_changes(context, persistence, changes, turn_id=turn_id)
        self._began_turn(context, turn_id, settings)
        return go_to_run_model(self._session, context)

    def _began_turn(
        self, context: AsyncContext, turn_id: str, settings: Mapping[str, Any] | None = None
    ) -> None:
        """After ``turn_id`` started: trace its activation, and copy the session settings
        (``settings``, else the stored ones) so an update during the turn takes effect
        at the next one."""
        trace_activation(context, self._session, type(self).__name__, turn_id)
        persistence = self._session.persistence
        if settings is None:
            settings, stored_as_text = read_session_settings(persistence.session_settings, context)
            if stored_as_text:
                # Stored by an earlier build as JSON text: rewrite it as the object.
                with contextlib.suppress(SessionSettingsStorageError):
                    store_session_settings(persistence.session_settings, context, settings)
        persistence.turn_session_settings.set(
            context, TurnSessionSettings(turn_id=turn_id, session_settings=settings)
        )

    def _session_settings(self, context: AsyncContext, turn_id: str) -> Mapping[str, Any]:
        """The settings ``turn_id`` started with (``{}`` for none)."""
        copy = read_optional(self._session.persistence.turn_session_settings, context)
        return turn_settings(copy, turn_id)

    def _turn_context(
        self,
        context: AsyncContext,
        turn_id: str,
        *,
        messages: Sequence[AgentMessage],
        records: Sequence[AgentToolCall],
        events: SessionEventWriter,
        heartbeat: Callable[[], Awaitable[None]],
        context_summary: ContextSummary | None = None,
        interaction_mode: InteractionMode = InteractionMode.CHAT,
        plan: AgentPlan | None = None,
    ) -> AgentTurnContext:
        """What the runner sees in this attempt, from committed state only."""
        options = self._session.options
        built_in_tools = options.built_in_tools
        if interaction_mode is InteractionMode.PLANNING:
            # A planning turn offers only write_todos; RunModel rejects any other call.
            built_in_tools = tuple(name for name in built_in_tools if name == WRITE_TODOS)
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
            enabled_built_in_tools=built_in_tools,
            context_summary=context_summary,
            session_settings=self._session_settings(context, turn_id),
            interaction_mode=interaction_mode,
            plan=plan,
        )


class StartAgentSession(_SessionStep, Step[AgentSessionStartInput]):
    """Initializes the session; starts ``turn-1`` when an initial message is set."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_load_attribute_maps=(self._session.persistence.agent_messages,),
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
        )

    async def execute(self, context: AsyncContext, input: AgentSessionStartInput) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        state = read_state(context, persistence) or AgentState()
        persistence.agent_state.set(context, state)
        if read_usage(context, persistence) == AgentUsage():
            persistence.agent_usage.set(context, AgentUsage())
        persistence.pending_interrupts.set(context, read_pending_interrupts(context, persistence))
        settings = input.session_settings
        if settings is not None:
            error = session_settings_error(
                settings, tolerance=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
            )
            if error is not None:
                return force_fail(f"{INVALID_START_SESSION_SETTINGS_REASON}: {error}")
            try:
                store_session_settings(persistence.session_settings, context, settings)
            except SessionSettingsStorageError as error:
                return force_fail(str(error))
        text = input.initial_message
        if text is None or not text.strip() or state.active_turn_id is not None:
            return go_to(AwaitUserMessage, None)
        return self._start_turn(context, state, text, settings=settings)


class AwaitUserMessage(_SessionStep, Step[None]):
    """Waits for, in this order, a steer, one queued user message, or an approval of the
    current plan revision, and starts the turn (a steer goes to ``ApplyTurnControl``)."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_load_attribute_maps=(self._session.persistence.agent_messages,),
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
            # No turn starts while cancel_turn decides.
            execute_lock_attributes=(self._session.persistence.turn_cancellation_request.lock(),),
        )

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        plan = read_plan(context, persistence)
        conditions = [
            persistence.turn_control_requests.for_one(),
            persistence.queued_user_messages.for_one(),
        ]
        if plan is not None and plan.status in ("draft", "active"):
            key = plan_execution_key(plan.revision)
            conditions.append(persistence.plan_executions.for_one(key))
        return Wait.any_of(*conditions)

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        if persistence.turn_control_requests.results(context):
            return route(self._session, TurnRouting(apply_turn_control=True), context)
        messages = persistence.queued_user_messages.results(context)
        state = read_state(context, persistence) or AgentState()
        plan = read_plan(context, persistence)
        if not messages:
            return self._execute_plan(context, state, plan)
        if state.active_turn_id is not None:
            raise RuntimeError(
                f"a user message arrived while {state.active_turn_id} is active; "
                "AwaitUserMessage runs only between turns"
            )
        mode = interaction_mode_for_turn(messages[0].plan_mode, plan)
        return self._start_turn(context, state, messages[0].text, interaction_mode=mode)

    def _execute_plan(
        self, context: AsyncContext, state: AgentState, plan: AgentPlan | None
    ) -> StepDecision:
        """Start the ``executing`` turn of an approved plan; a stale approval just waits again."""
        persistence = self._session.persistence
        if plan is None or state.active_turn_id is not None:
            return go_to(AwaitUserMessage, None)
        approvals = persistence.plan_executions.results(context, plan_execution_key(plan.revision))
        if not approvals or not is_current_plan_execution(approvals[0], plan):
            return go_to(AwaitUserMessage, None)
        persistence.pending_plan_execution.delete(context)
        user_message = self._session.runner.build_user_message(
            plan_execution_user_text(plan.revision)
        )
        changes, turn_id = start_turn(state, user_message, InteractionMode.EXECUTING)
        active = activate_plan(plan)
        if active is not None:
            changes.plan = active
            changes.event("plan_updated", **plan_updated_payload(active))
        changes.event("plan_execution_started", revision=plan.revision)
        commit_changes(context, persistence, changes, turn_id=turn_id)
        self._began_turn(context, turn_id)
        return go_to_run_model(self._session, context)


class RunModel(_SessionStep, Step[None]):
    """One model call through ``run_model_step``; routes to tools, or ends the turn."""

    def get_step_options(self) -> StepOptions | None:
        # A movement without options (such as from an older Worker) loads every chunk.
        return model_step_options(self._session, None)

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        state = read_state(context, persistence)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        turn_id = state.active_turn_id
        if read_turn_control(context, persistence, turn_id).reason is not None:
            # Steered or cancelled at a safe boundary: end the turn without a model call.
            return route(session, TurnRouting(apply_turn_control=True), context)
        summary = read_context_summary(context, persistence)
        compacting = isinstance(session.runner, SupportsCompaction)
        # Read before this Step writes anything, so what it sees is committed.
        messages = read_messages(
            context,
            persistence,
            after_sequence=model_input_start(session, summary),
            seen=session.committed_reads,
        )
        self._warn_about_deleted_input(context, compacting)
        records = read_records(context, persistence)
        plan = read_plan(context, persistence)
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
                    context_summary=summary if compacting else None,
                    interaction_mode=state.interaction_mode,
                    plan=plan,
                )
                through = await self._compaction_cutoff(turn, state, summary)
                if through is not None:
                    persistence.agent_state.set(context, start_compaction(state))
                    return self._go_to_compaction(context, through)
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
                plan=plan,
                trace_context=trace_parent,
                question_supersedes_later_calls=session.options.question_supersedes_later_calls,
            )
            apply_changes(context, persistence, changes, events)
        finally:
            events.close()
        return route(session, routing, context)

    async def _compaction_cutoff(
        self, turn: AgentTurnContext, state: AgentState, summary: ContextSummary | None
    ) -> int | None:
        """The sequence to summarize through when the input crossed the policy's threshold."""
        policy = self._session.options.compaction
        runner = self._session.runner
        if policy is None or not isinstance(runner, SupportsCompaction):
            return None
        tokens = await runner.estimate_input_tokens(turn)
        if tokens < policy.trigger_tokens:
            return None
        cutoff = await runner.select_compaction_cutoff(turn, policy.retained_token_budget)
        if not compaction_cutoff_is_new(cutoff, summary=summary, message_count=state.message_count):
            _log.warning(
                "%s: the model input (%d tokens) passed the compaction threshold, "
                "but the runner found no cut to summarize",
                turn.flow_id,
                tokens,
            )
            return None
        assert isinstance(cutoff, int)
        return cutoff

    def _go_to_compaction(self, context: AsyncContext, through: int) -> StepDecision:
        session = self._session
        keys = model_input_chunk_keys(
            session,
            read_message_index(context, session.persistence),
            read_context_summary(context, session.persistence),
        )
        return go_to_many(
            StepMovement[CompactContextInput](
                session.steps.compact_context,
                CompactContextInput(through_sequence=through),
                model_step_options(session, keys),
            )
        )

    def _warn_about_deleted_input(self, context: AsyncContext, compacting: bool) -> None:
        index = read_message_index(context, self._session.persistence)
        if not compacting and index is not None and index.first_sequence > 1:
            _log.warning(
                "%s: retention deleted the messages before %d, and this runner cannot "
                "use the summary; its model input starts at the oldest stored message",
                context.flow_id,
                index.first_sequence,
            )


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
        persistence = self._session.persistence
        # A steer wakes the turn so that its waits end at once.
        return Wait.any_of(
            persistence.tool_call_results.for_n(input), persistence.turn_control_requests.for_one()
        )

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        records = read_records(context, persistence)
        state = read_state(context, persistence)
        if persistence.turn_control_requests.results(context):
            turn_id = state.active_turn_id if state is not None else None
            reason = read_turn_control(context, persistence, turn_id).reason
            if turn_id is not None and reason is not None:
                pending = read_pending_interrupts(context, persistence)
                changes = steer_wake(turn_id, records, pending, reason)
                commit_changes(context, persistence, changes, turn_id=turn_id)
        still_open = open_record_count(records)
        if still_open > 0:
            # A stray completion or a steer resumed us early; wait for the calls still running.
            return go_to(ResumeTurn, still_open)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        if read_turn_control(context, persistence, state.active_turn_id).reason is not None:
            return route(self._session, TurnRouting(apply_turn_control=True), context)
        if state.status is not AgentStatus.RUNNING_MODEL:
            persistence.agent_state.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
        return go_to_run_model(self._session, context)


def record_turn_failure_options(session: SessionDefinition) -> StepOptions:
    """Static options of ``RecordTurnFailure``: capped backoff; messages only when needed."""
    persistence = session.persistence
    # The window always loads, because the Step appends messages; the chunks only
    # when the runner builds unfinished-turn messages from every stored message.
    maps = (
        (persistence.agent_tool_calls, persistence.agent_messages, persistence.agent_message_chunks)
        if isinstance(session.runner, SupportsUnfinishedTurnMessages)
        else (persistence.agent_tool_calls, persistence.agent_messages)
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
        return route(session, routing, context)

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


SessionStep = _SessionStep
"""The shared base of the session's Steps, for Steps defined in other modules."""
