"""LangChain messages as stored session messages, and the pairing rule for replay.

A stored message's ``framework_item`` is LangChain's own dict form of the message
(``messages_to_dict``) as JSON. It keeps content blocks (thinking with its
signature, provider reasoning), ``additional_kwargs`` and ``response_metadata``
exactly as the model returned them, so a replay sends the provider what it sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

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
    "RequestedToolCall",
    "framework_message_of",
    "framework_messages_of",
    "message_from_framework_item",
    "message_text",
    "message_to_framework_item",
    "pair_tool_calls_with_results",
    "result_message_of",
    "stored_messages",
    "tool_calls_of",
    "unanswered_tool_calls",
    "user_message",
]


def message_to_framework_item(message: BaseMessage) -> str:
    """LangChain's dict form of ``message`` as JSON text."""
    try:
        return json.dumps(messages_to_dict([message])[0], ensure_ascii=False)
    except TypeError as error:
        raise TypeError(
            f"a {type(message).__name__} holds a value that is not JSON ({error}); the session"
            " stores messages as JSON, so the model's response must be JSON-compatible"
        ) from error


def message_from_framework_item(item: str) -> BaseMessage:
    """The LangChain message stored as ``item``; ``ValueError`` for anything else."""
    try:
        data: Any = json.loads(item)
        return messages_from_dict([data])[0]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            "a stored message is not a LangChain message dict (messages_to_dict);"
            f" this session holds messages another runner wrote: {error}"
        ) from error


_DECODED_MESSAGES: DecodeCache[BaseMessage] = DecodeCache()
"""Decoded stored messages of this process by their JSON: every model Step reads the
whole history again, and a stored item never changes."""


def stored_messages(messages: Sequence[AgentMessage]) -> list[BaseMessage]:
    """The session's stored messages as LangChain messages, from framework items only.

    Each item is decoded once per process. A message without an ID is handed out
    as a copy, since LangGraph's ``add_messages`` reducer gives it one; a message
    with an ID is shared, and nothing changes it.
    """
    decoded = [
        _DECODED_MESSAGES.get_or_decode(message.framework_item, message_from_framework_item)
        for message in messages
        if not is_display_only(message.framework_item)
    ]
    return [message if message.id is not None else message.model_copy() for message in decoded]


def message_text(message: BaseMessage) -> str:
    """The plain text of a message (text content blocks joined)."""
    return str(message.text)  # a str subclass (TextAccessor) that the wire values refuse


def _role_of(message: BaseMessage) -> Literal["user", "assistant", "tool"]:
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    return "user"


def framework_messages_of(message: BaseMessage) -> list[FrameworkMessage]:
    """The stored form of ``message``: one message, or one per tool call of a model response.

    Display fields as every runner fills them (``response_messages``).
    """
    if not isinstance(message, AIMessage):
        return [framework_message_of(message)]
    return response_messages(
        message_to_framework_item(message),
        text=message_text(message) or None,
        tool_calls=[
            ToolCallDisplay(call.call_id, call.name, call.arguments)
            for call in tool_calls_of(message)
        ],
    )


def framework_message_of(message: BaseMessage) -> FrameworkMessage:
    """The stored form of a user or tool message: its dict form plus display projections."""
    item = message_to_framework_item(message)
    role = _role_of(message)
    if isinstance(message, ToolMessage):
        return FrameworkMessage(
            role=role,
            framework_item=item,
            tool_call_id=message.tool_call_id,
            tool_name=message.name,
            tool_output=_tool_output_text(message),
        )
    return FrameworkMessage(role=role, framework_item=item, text=message_text(message) or None)


def _tool_output_text(message: ToolMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return message_text(message) or json.dumps(message.content, ensure_ascii=False)


def user_message(text: str) -> FrameworkMessage:
    """A user message; no id, so it is the same for the same text."""
    return framework_message_of(HumanMessage(content=text))


def result_message_of(record: AgentToolCall) -> ToolMessage:
    """The result a model sees for a final record; anything but success is an error result."""
    return ToolMessage(
        content=describe_tool_call_outcome(record),
        tool_call_id=record.tool_call_id,
        name=record.tool_name,
        status="success" if record.status is AgentToolCallStatus.SUCCEEDED else "error",
    )


class RequestedToolCall(NamedTuple):
    """One call of an AI message: its ID, tool name and arguments as JSON text."""

    call_id: str
    name: str
    arguments: str


def tool_calls_of(message: AIMessage) -> list[RequestedToolCall]:
    """Every call ``message`` makes, the parsed ones first, then those with unparsable arguments.

    A call LangChain could not parse (``invalid_tool_calls``) still needs a result,
    so it is deferred like the others and fails in its tool Step.
    """
    calls = [
        RequestedToolCall(
            call["id"] or "", call["name"], json.dumps(call["args"], ensure_ascii=False)
        )
        for call in message.tool_calls
    ]
    calls.extend(
        RequestedToolCall(call["id"] or "", call["name"] or "", call["args"] or "")
        for call in message.invalid_tool_calls
    )
    return calls


def unanswered_tool_calls(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """``(id, name)`` of the last AI message's tool calls that have no result after it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {
                later.tool_call_id
                for later in messages[index + 1 :]
                if isinstance(later, ToolMessage)
            }
            return [
                (call.call_id, call.name)
                for call in tool_calls_of(message)
                if call.call_id not in answered
            ]
    return []


def pair_tool_calls_with_results(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Model input in which every tool call is followed by exactly one result.

    Right after each AI message come its calls' results, in call order. A call
    without a stored result (a turn that failed before its results were stored)
    gets an error result with the outcome-unknown text; a result that answers no
    call of the AI message before it is left out. Providers refuse both gaps and
    strays, and LangGraph does not check.
    """
    paired: list[BaseMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if isinstance(message, ToolMessage):
            continue  # a stray result; results are taken with their AI message below
        paired.append(message)
        calls = tool_calls_of(message) if isinstance(message, AIMessage) else []
        if not calls:
            continue
        results: dict[str, ToolMessage] = {}
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            result = messages[index]
            assert isinstance(result, ToolMessage)
            results.setdefault(result.tool_call_id, result)
            index += 1
        for call in calls:
            found = results.get(call.call_id)
            paired.append(
                found
                if found is not None
                else ToolMessage(
                    content=OUTCOME_UNKNOWN_TOOL_RESULT,
                    tool_call_id=call.call_id,
                    name=call.name,
                    status="error",
                )
            )
    return paired
