"""``create_agent_session_flow``: builds one session Flow and owns its persistence definitions."""

from __future__ import annotations

import inspect
from dataclasses import fields, replace
from datetime import timedelta
from typing import Unpack

from dex import (
    Attribute,
    AttributeMap,
    Channel,
    ChannelMap,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepList,
    Stream,
    rpc,
)

from dex_agents._compaction import check_compaction_runner
from dex_agents._contract import AgentFrameworkRunner, supports_plan_mode
from dex_agents._values import (
    AgentEvent,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentPlan,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    AnswerQuestionInput,
    CancelTurnInput,
    ContextSummary,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    ResolveInterruptInput,
    SteerUserMessageInput,
    ToolCallCompleted,
    TurnReplySequence,
    TurnSessionSettings,
    UpdateSessionSettingsInput,
)
from dex_agents.session import _rpcs as rpcs
from dex_agents.session import _turn_control_rpcs as turn_control_rpcs
from dex_agents.session._approvals import AwaitToolApproval
from dex_agents.session._cancellation import FinishTurnCancellation
from dex_agents.session._compaction_step import CompactContext
from dex_agents.session._failure_routes import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents.session._options import AgentSessionOptions, AgentSessionOptionValues
from dex_agents.session._persistence import (
    PendingInterruptList,
    SessionPersistence,
    SessionSettingsValue,
)
from dex_agents.session._questions import AwaitQuestionAnswer
from dex_agents.session._steering import ApplyTurnControl
from dex_agents.session._store import SessionDefinition, SessionSteps
from dex_agents.session._timers import AwaitTimer
from dex_agents.session._tool_tasks import CancelToolTask, PollToolTask
from dex_agents.session._tools import CallSingleAttemptTool, CallTool
from dex_agents.session._turn import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    RunModel,
    StartAgentSession,
)

__all__ = ["AgentSessionFlow", "create_agent_session_flow"]

RPC_TIMEOUT = timedelta(seconds=30)


class AgentSessionFlow(Flow[AgentSessionStartInput]):
    """One agent session Flow type. Build it with ``create_agent_session_flow``.

    Start a session with ``client.start_flow(flow, session_id,
    AgentSessionStartInput(initial_message=...))`` and call the RPCs with
    ``client.invoke_rpc(flow.send_user_message, session_id, AgentUserMessage(text=...))``.
    The persistence definitions are properties, for ``client`` reads and Streams.
    """

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    # --- identity and shape ---

    @property
    def session(self) -> SessionDefinition:
        return self._session

    @property
    def runner(self) -> AgentFrameworkRunner:
        return self._session.runner

    @property
    def options(self) -> AgentSessionOptions:
        return self._session.options

    def get_flow_type(self) -> str:
        return self._session.flow_type

    def get_steps(self) -> StepList[AgentSessionStartInput]:
        session = self._session
        start: Step[AgentSessionStartInput] = StartAgentSession(session)
        steps = StepList[AgentSessionStartInput].start_step(start)
        return steps.other_steps(
            AwaitUserMessage(session),
            RunModel(session),
            CallTool(session),
            CallSingleAttemptTool(session),
            AwaitToolApproval(session),
            AwaitQuestionAnswer(session),
            AwaitTimer(session),
            ResumeTurn(session),
            RecordToolFailure(session),
            RecordToolOutcomeUnknown(session),
            RecordTurnFailure(session),
            CompactContext(session),
            ApplyTurnControl(session),
            FinishTurnCancellation(session),
            PollToolTask(session),
            CancelToolTask(session),
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return self._session.persistence.schema()

    # --- persistence definitions ---

    @property
    def agent_state(self) -> Attribute[AgentState]:
        return self._session.persistence.agent_state

    @property
    def agent_messages(self) -> AttributeMap[AgentMessage]:
        return self._session.persistence.agent_messages

    @property
    def turn_reply_sequence(self) -> Attribute[TurnReplySequence]:
        return self._session.persistence.turn_reply_sequence

    @property
    def agent_message_chunks(self) -> AttributeMap[AgentMessageChunk]:
        return self._session.persistence.agent_message_chunks

    @property
    def agent_message_index(self) -> Attribute[AgentMessageIndex]:
        return self._session.persistence.agent_message_index

    @property
    def context_summary(self) -> Attribute[ContextSummary]:
        return self._session.persistence.context_summary

    @property
    def session_settings(self) -> Attribute[SessionSettingsValue]:
        return self._session.persistence.session_settings

    @property
    def turn_session_settings(self) -> Attribute[TurnSessionSettings]:
        return self._session.persistence.turn_session_settings

    @property
    def framework_run_state(self) -> Attribute[str]:
        return self._session.persistence.framework_run_state

    @property
    def agent_tool_calls(self) -> AttributeMap[AgentToolCall]:
        return self._session.persistence.agent_tool_calls

    @property
    def pending_interrupts(self) -> Attribute[PendingInterruptList]:
        return self._session.persistence.pending_interrupts

    @property
    def agent_usage(self) -> Attribute[AgentUsage]:
        return self._session.persistence.agent_usage

    @property
    def queued_user_messages(self) -> Channel[AgentUserMessage]:
        return self._session.persistence.queued_user_messages

    @property
    def interrupt_resolutions(self) -> ChannelMap[AgentInterruptResolution]:
        return self._session.persistence.interrupt_resolutions

    @property
    def tool_call_results(self) -> Channel[ToolCallCompleted]:
        return self._session.persistence.tool_call_results

    @property
    def agent_events(self) -> Stream[AgentEvent]:
        return self._session.persistence.agent_events

    @property
    def steered_user_messages(self) -> Channel[AgentUserMessage]:
        return self._session.persistence.steered_user_messages

    @property
    def agent_plan(self) -> Attribute[AgentPlan]:
        return self._session.persistence.agent_plan

    # --- RPCs (each Flow binds them with its own locks and loads) ---

    def send_user_message(self, context: Context, input: AgentUserMessage) -> RPCResult[bool]:
        """Queue a user message; ``False`` for blank text or a plan-mode message."""
        raise NotImplementedError

    def resolve_interrupt(self, context: Context, input: ResolveInterruptInput) -> RPCResult[bool]:
        """Approve or reject a pending interrupt; ``False`` when not pending or past deadline."""
        raise NotImplementedError

    def answer_question(self, context: Context, input: AnswerQuestionInput) -> RPCResult[bool]:
        """Answer a pending question; ``False`` when it does not fit or is not pending."""
        raise NotImplementedError

    def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
        """One committed view of the session."""
        raise NotImplementedError

    def list_agent_messages(
        self, context: Context, input: ListAgentMessagesInput
    ) -> RPCResult[ListAgentMessagesOutput]:
        """A page of stored messages, oldest first."""
        raise NotImplementedError

    def update_session_settings(
        self, context: Context, input: UpdateSessionSettingsInput
    ) -> RPCResult[bool]:
        """Replace the session settings; ``False`` before the session initialized."""
        raise NotImplementedError

    def steer_user_message(self, context: Context, input: SteerUserMessageInput) -> RPCResult[bool]:
        """Steer the active turn with new text or a queued message; queues text between turns."""
        raise NotImplementedError

    def delete_queued_message(
        self, context: Context, input: DeleteQueuedMessageInput
    ) -> RPCResult[bool]:
        """Delete a queued message; ``False`` when it is no longer queued."""
        raise NotImplementedError

    def cancel_turn(self, context: Context, input: CancelTurnInput) -> RPCResult[bool]:
        """Stop the active turn; ``False`` when it is not active or does not accept it."""
        raise NotImplementedError

    def execute_plan(self, context: Context, input: ExecutePlanInput) -> RPCResult[bool]:
        """Approve a plan revision; the session then starts the turn that executes it."""
        raise NotImplementedError


def _check_runner(runner: object) -> None:
    build = getattr(runner, "build_user_message", None)
    if not callable(build):
        raise TypeError("the runner needs a build_user_message(text) method")
    for name in ("run_model_step", "execute_deferred_tool_call"):
        method = getattr(runner, name, None)
        if not callable(method):
            raise TypeError(f"the runner needs an async {name} method")
        if not inspect.iscoroutinefunction(method):
            raise TypeError(f"the runner's {name} must be an async method (async def)")


def create_agent_session_flow(
    runner: AgentFrameworkRunner,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **option_values: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """Build a new session Flow for ``runner`` under ``flow_type``.

    Each call returns a new Flow with its own persistence definitions, so one
    Registry can hold several agents. Pass ``options`` or the same fields as
    keywords (``tool_policies=...``). Register the Flow with
    ``Registry([flow], allow_async_handlers=True)``: the session's Steps are async.
    """
    if not isinstance(flow_type, str) or not flow_type.strip() or "/" in flow_type:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("flow_type must be a non-empty name without '/'")
    _check_runner(runner)
    resolved = options if options is not None else AgentSessionOptions()
    if not isinstance(resolved, AgentSessionOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"options must be AgentSessionOptions or None, got {type(resolved).__name__}"
        )
    if option_values:
        known = {option.name for option in fields(AgentSessionOptions)}
        unknown = sorted(set(option_values) - known)
        if unknown:
            raise TypeError(
                f"unknown session option {', '.join(map(repr, unknown))}; "
                f"the options are {', '.join(sorted(known))}"
            )
        resolved = replace(resolved, **option_values)
    if resolved.compaction is not None:
        check_compaction_runner(runner)
    if resolved.plan_mode_enabled and not supports_plan_mode(runner):
        raise ValueError(
            f"plan_mode_enabled needs a runner whose supports_plan_mode is true; "
            f"{type(runner).__name__} cannot offer only write_todos in a planning turn"
        )
    persistence = SessionPersistence.create(
        resolved.event_stream_capacity_bytes, resolved.message_storage
    )
    steps = SessionSteps(
        apply_turn_control=ApplyTurnControl,
        compact_context=CompactContext,
        await_question_answer=AwaitQuestionAnswer,
        poll_tool_task=PollToolTask,
    )
    session = SessionDefinition(
        flow_type=flow_type, runner=runner, options=resolved, persistence=persistence, steps=steps
    )
    messages = persistence.agent_messages
    chunks = persistence.agent_message_chunks
    records = persistence.agent_tool_calls
    text_limit = resolved.max_user_message_bytes

    class _BoundAgentSessionFlow(AgentSessionFlow):
        @rpc(timeout=RPC_TIMEOUT)
        def send_user_message(self, context: Context, input: AgentUserMessage) -> RPCResult[bool]:
            return rpcs.send_user_message(
                context,
                persistence,
                input,
                text_limit,
                plan_mode_enabled=resolved.plan_mode_enabled,
            )

        @rpc(timeout=RPC_TIMEOUT, lock_attributes=(persistence.pending_interrupts.lock(),))
        def resolve_interrupt(
            self, context: Context, input: ResolveInterruptInput
        ) -> RPCResult[bool]:
            return rpcs.resolve_interrupt(context, persistence, input, text_limit)

        @rpc(timeout=RPC_TIMEOUT, lock_attributes=(persistence.pending_interrupts.lock(),))
        def answer_question(self, context: Context, input: AnswerQuestionInput) -> RPCResult[bool]:
            return rpcs.answer_question(context, persistence, input, text_limit)

        @rpc(
            timeout=RPC_TIMEOUT,
            load_attribute_maps=(messages, chunks, records),
            load_channels=(persistence.queued_user_messages, persistence.steered_user_messages),
        )
        def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
            return rpcs.get_agent_snapshot(context, persistence)

        @rpc(timeout=RPC_TIMEOUT, load_attribute_maps=(messages, chunks))
        def list_agent_messages(
            self, context: Context, input: ListAgentMessagesInput
        ) -> RPCResult[ListAgentMessagesOutput]:
            return rpcs.list_agent_messages(context, persistence, input)

        @rpc(timeout=RPC_TIMEOUT)
        def update_session_settings(
            self, context: Context, input: UpdateSessionSettingsInput
        ) -> RPCResult[bool]:
            return rpcs.update_session_settings(context, persistence, input)

        @rpc(
            timeout=RPC_TIMEOUT,
            is_transactional=True,
            load_channels=(persistence.queued_user_messages,),
        )
        def steer_user_message(
            self, context: Context, input: SteerUserMessageInput
        ) -> RPCResult[bool]:
            return turn_control_rpcs.steer_user_message(context, persistence, input, text_limit)

        @rpc(
            timeout=RPC_TIMEOUT,
            is_transactional=True,
            load_channels=(persistence.queued_user_messages,),
        )
        def delete_queued_message(
            self, context: Context, input: DeleteQueuedMessageInput
        ) -> RPCResult[bool]:
            return turn_control_rpcs.delete_queued_message(context, persistence, input)

        @rpc(
            timeout=RPC_TIMEOUT,
            lock_attributes=(
                persistence.turn_cancellation_request.lock(),
                persistence.pending_interrupts.lock(),
            ),
        )
        def cancel_turn(self, context: Context, input: CancelTurnInput) -> RPCResult[bool]:
            return turn_control_rpcs.cancel_turn(context, session, input)

        @rpc(timeout=RPC_TIMEOUT, lock_attributes=(persistence.pending_plan_execution.lock(),))
        def execute_plan(self, context: Context, input: ExecutePlanInput) -> RPCResult[bool]:
            return turn_control_rpcs.execute_plan(context, persistence, input)

    _BoundAgentSessionFlow.__name__ = "AgentSessionFlow"
    _BoundAgentSessionFlow.__qualname__ = "AgentSessionFlow"
    return _BoundAgentSessionFlow(session)
