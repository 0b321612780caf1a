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

from dex_agents.runner import AgentFrameworkRunner
from dex_agents.session import rpcs
from dex_agents.session.approvals import AwaitToolApproval
from dex_agents.session.options import AgentSessionOptions, AgentSessionOptionValues
from dex_agents.session.persistence import PendingInterruptList, SessionPersistence
from dex_agents.session.questions import AwaitQuestionAnswer
from dex_agents.session.store import SessionDefinition
from dex_agents.session.timers import AwaitTimer
from dex_agents.session.tools import (
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents.session.turn import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    RunModel,
    StartAgentSession,
)
from dex_agents.values import (
    AgentEvent,
    AgentInterruptResolution,
    AgentMessage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    AnswerQuestionInput,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    ResolveInterruptInput,
    ToolCallCompleted,
    TurnReplySequence,
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
    persistence = SessionPersistence.create(resolved.event_stream_capacity_bytes)
    session = SessionDefinition(
        flow_type=flow_type, runner=runner, options=resolved, persistence=persistence
    )
    messages = persistence.agent_messages
    records = persistence.agent_tool_calls

    class _BoundAgentSessionFlow(AgentSessionFlow):
        @rpc(timeout=RPC_TIMEOUT)
        def send_user_message(self, context: Context, input: AgentUserMessage) -> RPCResult[bool]:
            return rpcs.send_user_message(context, persistence, input)

        @rpc(timeout=RPC_TIMEOUT, lock_attributes=(persistence.pending_interrupts.lock(),))
        def resolve_interrupt(
            self, context: Context, input: ResolveInterruptInput
        ) -> RPCResult[bool]:
            return rpcs.resolve_interrupt(context, persistence, input)

        @rpc(timeout=RPC_TIMEOUT, lock_attributes=(persistence.pending_interrupts.lock(),))
        def answer_question(self, context: Context, input: AnswerQuestionInput) -> RPCResult[bool]:
            return rpcs.answer_question(context, persistence, input)

        @rpc(
            timeout=RPC_TIMEOUT,
            load_attribute_maps=(messages, records),
            load_channels=(persistence.queued_user_messages,),
        )
        def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
            return rpcs.get_agent_snapshot(context, persistence)

        @rpc(timeout=RPC_TIMEOUT, load_attribute_maps=(messages,))
        def list_agent_messages(
            self, context: Context, input: ListAgentMessagesInput
        ) -> RPCResult[ListAgentMessagesOutput]:
            return rpcs.list_agent_messages(context, persistence, input)

    _BoundAgentSessionFlow.__name__ = "AgentSessionFlow"
    _BoundAgentSessionFlow.__qualname__ = "AgentSessionFlow"
    return _BoundAgentSessionFlow(session)
