"""Stored messages as the SDK's own input items, and back.

Every stored message holds one Responses input item (the dict the SDK's
``to_input_list()`` gives) as JSON in ``framework_item``; the other message
fields are display projections. Items are replayed exactly as stored, reasoning
items with ``encrypted_content`` included.

The turn's ``framework_run_state`` is the SDK's ``RunState`` JSON plus two counters
of ours (``StepRunState``; see its section below).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT, DecodeCache
from dex_agents.values import AgentMessage, FrameworkMessage

__all__ = [
    "RUN_STATE_FORMAT",
    "InputItem",
    "StepRunState",
    "call_names",
    "decode_run_state",
    "encode_run_state",
    "framework_message_of",
    "message_text",
    "replay_items",
    "stored_item",
    "user_input_item",
]

InputItem = dict[str, Any]
"""One Responses input item as plain JSON (``TResponseInputItem`` as a dict)."""

_CALL_TYPE = "function_call"
_OUTPUT_TYPE = "function_call_output"


def user_input_item(text: str) -> InputItem:
    """The SDK's item for a user's text message (what ``Runner.run(agent, "text")`` builds)."""
    return {"role": "user", "content": text}


def _dump(item: Mapping[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def message_text(item: Mapping[str, Any]) -> str | None:
    """The readable text of a message item: its string content or its text parts joined."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for part in cast(list[Any], content):
        if isinstance(part, Mapping):
            text = cast(Mapping[str, Any], part).get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts) if parts else None


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def call_names(items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The tool name of each function call in ``items``, by call ID."""
    return {
        item["call_id"]: item["name"]
        for item in items
        if item.get("type") == _CALL_TYPE
        and isinstance(item.get("call_id"), str)
        and isinstance(item.get("name"), str)
    }


def framework_message_of(
    item: Mapping[str, Any], tool_names: Mapping[str, str] | None = None
) -> FrameworkMessage:
    """The stored message of one input item: the item's JSON plus display fields.

    A function call output names its tool from ``tool_names`` (call ID to name),
    as the SDK's output item does not carry it.
    """
    kind = item.get("type")
    framework_item = _dump(item)
    if kind == _CALL_TYPE:
        return FrameworkMessage(
            role="assistant",
            framework_item=framework_item,
            tool_call_id=_str_or_none(item.get("call_id")),
            tool_name=_str_or_none(item.get("name")),
            tool_arguments=_str_or_none(item.get("arguments")),
        )
    if kind == _OUTPUT_TYPE:
        call_id = _str_or_none(item.get("call_id"))
        return FrameworkMessage(
            role="tool",
            framework_item=framework_item,
            tool_call_id=call_id,
            tool_name=(tool_names or {}).get(call_id) if call_id is not None else None,
            tool_output=_output_text(item.get("output")),
        )
    role = item.get("role")
    if kind in (None, "message") and role in ("user", "system", "developer"):
        # System and developer items are shown as user-side input; the item keeps its role.
        return FrameworkMessage(role="user", framework_item=framework_item, text=message_text(item))
    if kind in (None, "message") and role == "assistant":
        return FrameworkMessage(
            role="assistant", framework_item=framework_item, text=message_text(item)
        )
    # Reasoning, hosted tool calls and anything else the model produced: stored, not shown.
    return FrameworkMessage(role="assistant", framework_item=framework_item)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_DECODED_ITEMS: DecodeCache[InputItem] = DecodeCache()
"""Decoded stored items of this process by their JSON: every model Step reads the whole
history again, and a stored item never changes."""


def stored_item(message: AgentMessage) -> InputItem:
    """The input item stored in ``message``, decoded once per process.

    The item is shared: read it, never change it. The SDK copies the input items
    it is given before it changes any (``copy_input_items``).
    """
    try:
        return _DECODED_ITEMS.get_or_decode(message.framework_item, _decode_item)
    except ValueError as error:
        raise ValueError(f"stored message {message.sequence} {error}") from error


def _decode_item(framework_item: str) -> InputItem:
    try:
        item = json.loads(framework_item)
    except json.JSONDecodeError as error:
        raise ValueError(f"is not an OpenAI Agents SDK input item: {error}") from error
    if not isinstance(item, dict):
        raise ValueError("is not a JSON object")
    return cast(InputItem, item)


def replay_items(messages: Sequence[AgentMessage]) -> list[InputItem]:
    """Model input from stored messages: every item unchanged, each call paired with a result.

    A stored function call without a stored output (possible only after a turn
    failed mid-way) gets an outcome-unknown output right after its response's
    calls, so no orphaned call reaches a provider. The added item is not stored.
    """
    items = [stored_item(message) for message in messages]
    answered = {item.get("call_id") for item in items if item.get("type") == _OUTPUT_TYPE}
    replayed: list[InputItem] = []
    pending: list[InputItem] = []
    for item in items:
        if item.get("type") not in (_CALL_TYPE, _OUTPUT_TYPE) and pending:
            replayed.extend(pending)
            pending = []
        replayed.append(item)
        call_id = item.get("call_id")
        if item.get("type") == _CALL_TYPE and call_id not in answered:
            pending.append(
                {"call_id": call_id, "output": OUTCOME_UNKNOWN_TOOL_RESULT, "type": _OUTPUT_TYPE}
            )
    replayed.extend(pending)
    return replayed


# --- the framework run state ---------------------------------------------------------
#
# ``framework_run_state``: the SDK's ``RunState`` JSON plus two counters of ours.
#
# ``stored_item_count`` is how many items of the run's input list are already
# stored as messages, so the next step stores only what follows; and
# ``model_response_count`` is how many model responses the state already holds,
# so usage counts only this step's responses (the SDK's counters are cumulative).

RUN_STATE_FORMAT = "dex-agents-openai-agents/1"


@dataclass(frozen=True)
class StepRunState:
    run_state: dict[str, Any]
    stored_item_count: int
    model_response_count: int


def encode_run_state(state: StepRunState) -> str:
    return json.dumps(
        {
            "format": RUN_STATE_FORMAT,
            "stored_item_count": state.stored_item_count,
            "model_response_count": state.model_response_count,
            "run_state": state.run_state,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_run_state(text: str) -> StepRunState:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"framework_run_state is not JSON: {error}") from error
    if not isinstance(data, dict) or cast(dict[str, Any], data).get("format") != RUN_STATE_FORMAT:
        raise ValueError(
            f"framework_run_state was not written by this adapter (expected {RUN_STATE_FORMAT})"
        )
    fields = cast(dict[str, Any], data)
    run_state = fields.get("run_state")
    stored = fields.get("stored_item_count")
    responses = fields.get("model_response_count")
    if not isinstance(run_state, dict) or type(stored) is not int or type(responses) is not int:
        raise ValueError("framework_run_state is missing its RunState or counters")
    return StepRunState(cast(dict[str, Any], run_state), stored, responses)
