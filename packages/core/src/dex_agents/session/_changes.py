"""What a session transition changes, as plain data.

The pure rules modules (``turn_rules``, ``tool_rules``, ``approval_rules``, ...) return
``SessionChanges``; the Step glue applies them to Dex in one handler result. Keeping
the changes as data lets the rules be unit-tested without an engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentPlan,
    AgentState,
    AgentToolCall,
    AgentUsage,
    TurnReplySequence,
)

__all__ = ["EventSpec", "SessionChanges"]


@dataclass(frozen=True)
class EventSpec:
    """An ``AgentEvents`` event to write: its type and JSON payload."""

    type: str
    payload: Mapping[str, Any]


@dataclass
class SessionChanges:
    """Writes, publications and events of one transition; ``None`` means unchanged.

    ``framework_run_state`` is changed only when ``framework_run_state_changed``;
    then ``None`` deletes it. ``completed_tool_calls`` are published to
    ``ToolCallResults``, once per call whose record became final.
    """

    state: AgentState | None = None
    appended_messages: list[AgentMessage] = field(default_factory=lambda: list[AgentMessage]())
    written_records: list[AgentToolCall] = field(default_factory=lambda: list[AgentToolCall]())
    deleted_record_ids: list[str] = field(default_factory=lambda: list[str]())
    pending_interrupts: tuple[AgentInterrupt, ...] | None = None
    framework_run_state: str | None = None
    framework_run_state_changed: bool = False
    usage: AgentUsage | None = None
    reply_sequence: TurnReplySequence | None = None
    completed_tool_calls: list[str] = field(default_factory=lambda: list[str]())
    events: list[EventSpec] = field(default_factory=lambda: list[EventSpec]())
    plan: AgentPlan | None = None
    """A new ``AgentPlan`` to write (``write_todos``, or an approval that activates it)."""
    tool_call_cancellations: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """Reasons by tool call ID, published to ``ToolCallCancellations`` to end those waits."""

    def merge(self, other: SessionChanges) -> None:
        """Add ``other``'s records, publications and events to these changes."""
        self.written_records.extend(other.written_records)
        self.completed_tool_calls.extend(other.completed_tool_calls)
        self.events.extend(other.events)
        self.tool_call_cancellations.update(other.tool_call_cancellations)

    def set_framework_run_state(self, value: str | None) -> None:
        """Write the run state, or delete it with ``None``."""
        self.framework_run_state = value
        self.framework_run_state_changed = True

    def event(self, type: str, **payload: Any) -> None:
        """Add an event with ``payload`` as its JSON object."""
        self.events.append(EventSpec(type, payload))
