"""Messages API messages as stored session messages, and the request's message list.

Every stored ``framework_item`` is a Messages API ``MessageParam`` as JSON:

* a user message: ``{"role": "user", "content": [{"type": "text", "text": ...}]}``;
* a model response: ``{"role": "assistant", "content": [...]}`` with the content
  blocks exactly as returned (thinking with its signature, redacted thinking
  with its data, text, ``tool_use``, server tool blocks);
* one tool result: ``{"role": "user", "content": [{"type": "tool_result", ...}]}``.

``request_messages`` replays them unchanged, answers every ``tool_use`` with
exactly one ``tool_result`` at the start of the next user turn, and merges
consecutive messages of one role.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

from dex_agents import AgentMessage, AgentToolCall, AgentToolCallStatus
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    DecodeCache,
    ToolCallDisplay,
    describe_tool_call_outcome,
    is_display_only,
    response_messages,
)
from dex_agents.values import FrameworkMessage

__all__ = [
    "ToolUse",
    "assistant_messages",
    "decode_item",
    "request_messages",
    "stored_items",
    "tool_result_message",
    "tool_uses_of",
    "unanswered_tool_uses",
    "user_message",
]

JsonObject = dict[str, Any]


class ToolUse(NamedTuple):
    """One ``tool_use`` block: its ID, tool name and input as JSON text."""

    call_id: str
    name: str
    arguments: str


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


_DECODED_ITEMS: DecodeCache[JsonObject] = DecodeCache()
"""Decoded stored items of this process by their JSON: every model Step reads the whole
history again, and a stored item never changes."""


def decode_item(item: str) -> JsonObject:
    """A stored ``MessageParam``, decoded once per process; ``ValueError`` for anything else.

    The value is shared: read it, never change it (``request_messages`` builds the
    request's own message dicts and content lists; the SDK copies what it sends).
    """
    return _DECODED_ITEMS.get_or_decode(item, _decode_item)


def _decode_item(item: str) -> JsonObject:
    try:
        value: Any = json.loads(item)
    except ValueError as error:
        raise ValueError(f"a stored message is not JSON: {error}") from error
    if (
        not isinstance(value, dict)
        or cast(JsonObject, value).get("role") not in ("user", "assistant")
        or not isinstance(cast(JsonObject, value).get("content"), list)
    ):
        raise ValueError(
            "a stored message is not a Messages API message ({role, content: [...]});"
            " this session holds messages another runner wrote"
        )
    return cast(JsonObject, value)


def _blocks(message: Mapping[str, Any]) -> list[JsonObject]:
    return [b for b in cast(list[Any], message["content"]) if isinstance(b, dict)]


def tool_uses_of(message: Mapping[str, Any]) -> list[ToolUse]:
    """The ``tool_use`` blocks of an assistant message, in order."""
    if message.get("role") != "assistant":
        return []
    return [
        ToolUse(str(b.get("id") or ""), str(b.get("name") or ""), _dumps(b.get("input", {})))
        for b in _blocks(message)
        if b.get("type") == "tool_use"
    ]


def _is_tool_result_message(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and _only_tool_results(_blocks(message))


def _only_tool_results(blocks: Sequence[Mapping[str, Any]]) -> bool:
    return bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)


def _text_of(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def user_message(text: str) -> FrameworkMessage:
    item = {"role": "user", "content": [{"type": "text", "text": text}]}
    return FrameworkMessage(role="user", framework_item=_dumps(item), text=text)


def assistant_messages(content: Sequence[JsonObject]) -> list[FrameworkMessage]:
    """The stored model response: one message, or one per ``tool_use`` block.

    Display fields as every runner fills them (``response_messages``).
    """
    item = {"role": "assistant", "content": list(content)}
    return response_messages(
        _dumps(item),
        text=_text_of(content) or None,
        tool_calls=[
            ToolCallDisplay(use.call_id, use.name, use.arguments) for use in tool_uses_of(item)
        ],
    )


def stored_items(messages: Sequence[AgentMessage | FrameworkMessage]) -> list[JsonObject]:
    """The Messages API items of stored messages, without those that only show a call."""
    return [
        decode_item(message.framework_item)
        for message in messages
        if not is_display_only(message.framework_item)
    ]


def _tool_result_block(tool_use_id: str, text: str, is_error: bool) -> JsonObject:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": text,
        "is_error": is_error,
    }


def tool_result_message(record: AgentToolCall) -> FrameworkMessage:
    """The result a model sees for a final record; anything but success is an error result."""
    text = describe_tool_call_outcome(record)
    block = _tool_result_block(
        record.tool_call_id, text, record.status is not AgentToolCallStatus.SUCCEEDED
    )
    return FrameworkMessage(
        role="tool",
        framework_item=_dumps({"role": "user", "content": [block]}),
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        tool_output=text,
    )


def unanswered_tool_uses(messages: Sequence[AgentMessage]) -> list[ToolUse]:
    """The last assistant message's calls that have no stored result after it."""
    items = stored_items(messages)
    for index in range(len(items) - 1, -1, -1):
        if items[index]["role"] == "assistant":
            answered = {
                str(b.get("tool_use_id"))
                for later in items[index + 1 :]
                if _is_tool_result_message(later)
                for b in _blocks(later)
            }
            return [use for use in tool_uses_of(items[index]) if use.call_id not in answered]
    return []


def request_messages(items: Sequence[Mapping[str, Any]]) -> list[JsonObject]:
    """The request's ``messages``: stored items replayed, every ``tool_use`` answered once.

    Right after each assistant message comes one user turn that starts with a
    ``tool_result`` for each of its ``tool_use`` blocks, in order: the stored
    result, or an error result with the outcome-unknown text when none was
    stored (a turn that failed). A result that answers no call of the assistant
    message before it is left out. An assistant message with no content is left
    out too, because the API refuses it. Consecutive messages of one role merge.
    """
    # One pass over each item's blocks: every model Step pairs the whole stored
    # conversation, so a pass per check made a 200-turn session's Step cost 3 ms here.
    paired: list[JsonObject] = []
    index, count = 0, len(items)
    while index < count:
        item = items[index]
        index += 1
        role = item["role"]
        blocks = _blocks(item)
        if role == "user" and _only_tool_results(blocks):
            continue  # a stray result; results are taken with their assistant message below
        if role == "assistant" and not blocks:
            continue
        paired.append({"role": role, "content": list(cast(list[Any], item["content"]))})
        call_ids = (
            [str(b.get("id") or "") for b in blocks if b.get("type") == "tool_use"]
            if role == "assistant"
            else []
        )
        if not call_ids:
            continue
        results: dict[str, JsonObject] = {}
        while index < count:
            later = items[index]
            later_blocks = _blocks(later)
            if later["role"] != "user" or not _only_tool_results(later_blocks):
                break
            for block in later_blocks:
                results.setdefault(str(block.get("tool_use_id")), block)
            index += 1
        paired.append(
            {
                "role": "user",
                "content": [
                    results.get(call_id)
                    or _tool_result_block(call_id, OUTCOME_UNKNOWN_TOOL_RESULT, True)
                    for call_id in call_ids
                ],
            }
        )
    merged: list[JsonObject] = []
    for message in paired:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"].extend(message["content"])
        else:
            merged.append(message)
    return merged
