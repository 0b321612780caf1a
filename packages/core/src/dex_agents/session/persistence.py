"""The session's persistence definitions, created anew for every Flow.

The persisted names are the same for every Flow type; each Flow owns its own
definition objects because a Dex Registry matches definitions by identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dex import Attribute, AttributeMap, Channel, ChannelMap, PersistenceSchema, Stream

from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ToolCallCompleted,
    TurnReplySequence,
)

__all__ = ["PendingInterruptList", "SessionPersistence"]

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

    @staticmethod
    def create(event_stream_capacity_bytes: int) -> SessionPersistence:
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
            self.agent_trace_context,
        )
        return PersistenceSchema.of(*definitions)
