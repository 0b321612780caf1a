"""Snapshots for browsers: wire JSON without Step-only fields, and AI SDK ``UIMessage`` objects.

``framework_item`` is the framework's replay data and can hold the agent's
instructions; ``tool_source_reference``, ``trace_context``, ``input_continuation``,
``input_answers`` and ``task_answer_pending`` serve only the session's Steps.
None of them reaches a browser through these helpers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import dex

from dex_agents._values import (
    AgentMessage,
    AgentSnapshot,
    AgentToolCall,
    AgentToolCallStatus,
    to_wire,
)
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.ui_stream._positions import latest_position, turn_start_position

__all__ = [
    "STEP_ONLY_MESSAGE_FIELDS",
    "STEP_ONLY_TOOL_CALL_FIELDS",
    "AgentEventStreamSnapshot",
    "assistant_message_id",
    "convert_agent_event_stream_snapshot_to_json",
    "convert_agent_snapshot_to_json",
    "convert_agent_snapshot_to_ui_messages",
    "parse_tool_input",
    "read_agent_event_stream_snapshot",
    "tool_output_part",
]

STEP_ONLY_MESSAGE_FIELDS = frozenset({"framework_item"})
"""Message fields only Steps read; browser-safe snapshots leave them out."""
STEP_ONLY_TOOL_CALL_FIELDS = frozenset(
    {
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending",
    }
)
"""Tool call fields only Steps read; browser-safe snapshots leave them out."""


def assistant_message_id(turn_id: str) -> str:
    """The ID of the ``UIMessage`` that holds a turn's replies."""
    return f"{turn_id}-assistant"


def convert_agent_snapshot_to_json(snapshot: AgentSnapshot) -> dict[str, Any]:
    """``get_agent_snapshot`` wire JSON without the fields only the session's Steps use."""
    data = cast("dict[str, Any]", to_wire(snapshot))
    data["messages"] = [
        {key: value for key, value in message.items() if key not in STEP_ONLY_MESSAGE_FIELDS}
        for message in data.get("messages", [])
    ]
    data["tool_calls"] = [
        {key: value for key, value in call.items() if key not in STEP_ONLY_TOOL_CALL_FIELDS}
        for call in data.get("tool_calls", [])
    ]
    return data


@dataclass(frozen=True)
class AgentEventStreamSnapshot:
    """A committed snapshot and the Dex resume token to read events from.

    While a turn is active the token replays that turn's events; otherwise it
    continues after the newest retained event.
    """

    snapshot: AgentSnapshot
    resume_token: str


async def read_agent_event_stream_snapshot(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str
) -> AgentEventStreamSnapshot:
    """Read the position first, so no event between the two reads is missed."""
    latest = await latest_position(client, flow, flow_id)
    snapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    turn_id = snapshot.state.active_turn_id if snapshot.state is not None else None
    if turn_id is None:
        return AgentEventStreamSnapshot(snapshot, latest)
    start = await turn_start_position(client, flow, flow_id, turn_id)
    return AgentEventStreamSnapshot(snapshot, start.token)


def convert_agent_event_stream_snapshot_to_json(value: AgentEventStreamSnapshot) -> dict[str, Any]:
    """The browser-safe snapshot JSON with ``resume_token`` added."""
    data = convert_agent_snapshot_to_json(value.snapshot)
    data["resume_token"] = value.resume_token
    return data


# --- UIMessage objects ---------------------------------------------------------------------


def parse_tool_input(arguments: str | None) -> Any:
    """Tool arguments as JSON when they parse, else the text itself."""
    if arguments is None:
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def tool_output_part(record: AgentToolCall) -> dict[str, Any]:
    """The fields of a final record's tool part (state and output or error)."""
    if record.status is AgentToolCallStatus.SUCCEEDED:
        return {"state": "output-available", "output": record.output or ""}
    if record.status is AgentToolCallStatus.REJECTED:
        return {"state": "output-denied"}
    return {"state": "output-error", "errorText": record.error or record.status.value}


def _record_part(record: AgentToolCall, snapshot: AgentSnapshot) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "dynamic-tool",
        "toolName": record.tool_name,
        "toolCallId": record.tool_call_id,
        "state": "input-available",
        "input": parse_tool_input(record.arguments),
    }
    pending = {interrupt.tool_call_id: interrupt for interrupt in snapshot.pending_interrupts}
    if record.is_final:
        part.update(tool_output_part(record))
        if record.status is AgentToolCallStatus.REJECTED and record.requires_approval:
            part["approval"] = {"id": record.tool_call_id, "approved": False}
    elif record.status is AgentToolCallStatus.AWAITING_APPROVAL and record.tool_call_id in pending:
        part["state"] = "approval-requested"
        part["approval"] = {"id": pending[record.tool_call_id].interrupt_id}
    elif record.requires_approval and record.status is not AgentToolCallStatus.AWAITING_APPROVAL:
        part["state"] = "approval-responded"
        part["approval"] = {"id": record.tool_call_id, "approved": True}
    return part


def convert_agent_snapshot_to_ui_messages(snapshot: AgentSnapshot) -> list[dict[str, Any]]:
    """The stored messages as AI SDK ``UIMessage`` objects, one assistant message per turn.

    The active turn's tool calls that are not stored as messages yet come from
    their records, with their approval state.
    """
    ui_messages: list[dict[str, Any]] = []
    assistants: dict[str, dict[str, Any]] = {}
    tool_parts: dict[tuple[str, str], dict[str, Any]] = {}
    for message in snapshot.messages:
        if message.role == "user":
            ui_messages.append(_user_message(message, ui_messages))
            continue
        assistant = assistants.get(message.turn_id)
        if assistant is None:
            assistant = _assistant_message(message.turn_id)
            assistants[message.turn_id] = assistant
            ui_messages.append(assistant)
        parts = cast("list[dict[str, Any]]", assistant["parts"])
        _add_stored_parts(message, parts, tool_parts)
    active = snapshot.state.active_turn_id if snapshot.state is not None else None
    if active is not None:
        records = sorted(
            (r for r in snapshot.tool_calls if r.turn_id == active),
            key=lambda r: r.deferral_order,
        )
        for record in records:
            key = (active, record.tool_call_id)
            part = _record_part(record, snapshot)
            if key in tool_parts:
                tool_parts[key].update(part)
                continue
            assistant = assistants.get(active)
            if assistant is None:
                assistant = _assistant_message(active)
                assistants[active] = assistant
                ui_messages.append(assistant)
            cast("list[dict[str, Any]]", assistant["parts"]).append(part)
            tool_parts[key] = part
    return ui_messages


def _assistant_message(turn_id: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    return {"id": assistant_message_id(turn_id), "role": "assistant", "parts": parts}


def _user_message(message: AgentMessage, previous: list[dict[str, Any]]) -> dict[str, Any]:
    identifier = f"{message.turn_id}-user"
    if any(ui["id"] == identifier for ui in previous):
        identifier = f"{identifier}-{message.sequence}"
    return {
        "id": identifier,
        "role": "user",
        "parts": [{"type": "text", "text": message.text or ""}],
    }


def _add_stored_parts(
    message: AgentMessage,
    parts: list[dict[str, Any]],
    tool_parts: dict[tuple[str, str], dict[str, Any]],
) -> None:
    if message.role == "tool":
        key = (message.turn_id, message.tool_call_id or "")
        found = tool_parts.get(key)
        if found is None:
            empty_input: dict[str, Any] = {}
            found = {
                "type": "dynamic-tool",
                "toolName": message.tool_name or "",
                "toolCallId": message.tool_call_id or "",
                "input": empty_input,
            }
            parts.append(found)
            tool_parts[key] = found
        # A stored result is the text the model saw, whatever the call's status was.
        found["state"] = "output-available"
        found["output"] = message.tool_output or ""
        return
    if (
        parts
        and parts[-1].get("type") == "dynamic-tool"
        and parts[-1].get("state")
        in (
            "output-available",
            "output-error",
            "output-denied",
        )
    ):
        parts.append({"type": "step-start"})  # a model call after tool results
    if message.text:
        parts.append({"type": "text", "text": message.text, "state": "done"})
    if message.tool_call_id:
        part: dict[str, Any] = {
            "type": "dynamic-tool",
            "toolName": message.tool_name or "",
            "toolCallId": message.tool_call_id,
            "state": "input-available",
            "input": parse_tool_input(message.tool_arguments),
        }
        parts.append(part)
        tool_parts[(message.turn_id, message.tool_call_id)] = part
