"""The session's persistence definitions, created anew for every Flow.

The persisted names are the same for every Flow type; each Flow owns its own
definition objects because a Dex Registry matches definitions by identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dex import Attribute, AttributeMap, Channel, ChannelMap, PersistenceSchema, Stream

from dex_agents._storage import MessageStorageSettings
from dex_agents._values import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentPlan,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ContextSummary,
    PlanExecutionRequest,
    SessionSettingsValue,
    ToolCallCancellation,
    ToolCallCompleted,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
)

__all__ = ["PendingInterruptList", "SessionPersistence", "SessionSettingsValue"]

PendingInterruptList = tuple[AgentInterrupt, ...]
"""``PendingInterrupts`` holds a JSON array of ``AgentInterrupt``."""


@dataclass(frozen=True)
class SessionPersistence:
    """Every Attribute, Channel and Stream of one session Flow."""

    agent_state: Attribute[AgentState]
    agent_messages: AttributeMap[AgentMessage]
    turn_reply_sequence: Attribute[TurnReplySequence]
    framework_run_state: Attribute[str]
    agent_tool_calls: AttributeMap[AgentToolCall]
    pending_interrupts: Attribute[PendingInterruptList]
    agent_usage: Attribute[AgentUsage]
    queued_user_messages: Channel[AgentUserMessage]
    interrupt_resolutions: ChannelMap[AgentInterruptResolution]
    tool_call_results: Channel[ToolCallCompleted]
    agent_events: Stream[AgentEvent]
    agent_trace_context: Attribute[str]
    # Steering, cancellation and plans.
    steered_user_messages: Channel[AgentUserMessage]
    turn_control_requests: Channel[TurnControlRequest]
    turn_cancellation_request: Attribute[TurnCancellationRequest]
    tool_call_cancellations: ChannelMap[ToolCallCancellation]
    agent_plan: Attribute[AgentPlan]
    plan_executions: ChannelMap[PlanExecutionRequest]
    pending_plan_execution: Attribute[PlanExecutionRequest]
    # Message storage and session settings.
    agent_message_chunks: AttributeMap[AgentMessageChunk] = field(
        default_factory=lambda: AttributeMap("AgentMessageChunks", AgentMessageChunk)
    )
    agent_message_index: Attribute[AgentMessageIndex] = field(
        default_factory=lambda: Attribute("AgentMessageIndex", AgentMessageIndex)
    )
    context_summary: Attribute[ContextSummary] = field(
        default_factory=lambda: Attribute("ContextSummary", ContextSummary)
    )
    session_settings: Attribute[SessionSettingsValue] = field(
        default_factory=lambda: Attribute("SessionSettings", SessionSettingsValue)
    )
    turn_session_settings: Attribute[TurnSessionSettings] = field(
        default_factory=lambda: Attribute("TurnSessionSettings", TurnSessionSettings)
    )
    message_storage: MessageStorageSettings = field(default_factory=MessageStorageSettings)
    """Window, chunk and retention bounds that every message append applies."""

    @staticmethod
    def create(
        event_stream_capacity_bytes: int,
        message_storage: MessageStorageSettings | None = None,
    ) -> SessionPersistence:
        """New definitions with the contract's names."""
        return SessionPersistence(
            agent_state=Attribute("AgentState", AgentState),
            agent_messages=AttributeMap("AgentMessages", AgentMessage),
            turn_reply_sequence=Attribute("TurnReplySequence", TurnReplySequence),
            framework_run_state=Attribute("FrameworkRunState", str),
            agent_tool_calls=AttributeMap("AgentToolCalls", AgentToolCall),
            pending_interrupts=Attribute("PendingInterrupts", PendingInterruptList),
            agent_usage=Attribute("AgentUsage", AgentUsage),
            queued_user_messages=Channel("QueuedUserMessages", AgentUserMessage),
            interrupt_resolutions=ChannelMap("InterruptResolutions", AgentInterruptResolution),
            tool_call_results=Channel("ToolCallResults", ToolCallCompleted),
            agent_events=Stream("AgentEvents", AgentEvent, event_stream_capacity_bytes),
            message_storage=message_storage or MessageStorageSettings(),
            steered_user_messages=Channel("SteeredUserMessages", AgentUserMessage),
            turn_control_requests=Channel("TurnControlRequests", TurnControlRequest),
            turn_cancellation_request=Attribute("TurnCancellationRequest", TurnCancellationRequest),
            tool_call_cancellations=ChannelMap("ToolCallCancellations", ToolCallCancellation),
            agent_plan=Attribute("AgentPlan", AgentPlan),
            plan_executions=ChannelMap("PlanExecutions", PlanExecutionRequest),
            pending_plan_execution=Attribute("PendingPlanExecution", PlanExecutionRequest),
            agent_trace_context=Attribute("AgentTraceContext", str),
        )

    def schema(self) -> PersistenceSchema:
        definitions: tuple[Any, ...] = (
            self.agent_state,
            self.agent_messages,
            self.turn_reply_sequence,
            self.framework_run_state,
            self.agent_tool_calls,
            self.pending_interrupts,
            self.agent_usage,
            self.queued_user_messages,
            self.interrupt_resolutions,
            self.tool_call_results,
            self.agent_events,
            self.agent_message_chunks,
            self.agent_message_index,
            self.context_summary,
            self.session_settings,
            self.turn_session_settings,
            self.steered_user_messages,
            self.turn_control_requests,
            self.turn_cancellation_request,
            self.tool_call_cancellations,
            self.agent_plan,
            self.plan_executions,
            self.pending_plan_execution,
            self.agent_trace_context,
        )
        return PersistenceSchema.of(*definitions)
