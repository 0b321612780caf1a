"""Test helpers for Claude agents: a Messages API endpoint on ``httpx2.MockTransport``,
no network, no key.

``sse_response(message)`` streams a complete Messages API response the way the
API does (``message_start``, content block start/delta/stop events,
``message_delta``, ``message_stop``), so the real SDK parses it;
``response_message(content)`` builds that response and ``error_response`` an API
error. ``mock_client_factory(handler)`` builds ``AsyncAnthropic`` clients over a
``MockTransport``. The suite's ``ScriptedMessagesEndpoint`` and ``scenario_tool``
moved to ``dex_agents_claude_sdk.conformance``; their old names here still work,
with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, cast

import anthropic
import httpx2

from dex_agents_claude_sdk import ClientFactory

__all__ = [
    "SCRIPTED_MODEL",
    "error_response",
    "message_events",
    "mock_client_factory",
    "response_message",
    "sse_response",
]

SCRIPTED_MODEL = "claude-scripted"
Handler = Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]
JsonObject = dict[str, Any]


def message_events(message: Mapping[str, Any]) -> list[JsonObject]:
    """The stream events that deliver ``message`` (a complete Messages API response)."""
    content = cast(list[JsonObject], message["content"])
    usage = dict(cast(Mapping[str, Any], message.get("usage") or {}))
    output_tokens = usage.get("output_tokens", 0)
    start_usage = {**usage, "output_tokens": 1}
    events: list[JsonObject] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        }
    ]
    for index, block in enumerate(content):
        events.extend(_block_events(index, block))
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message.get("stop_reason"),
                "stop_sequence": message.get("stop_sequence"),
            },
            "usage": {"output_tokens": output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _block_events(index: int, block: JsonObject) -> list[JsonObject]:
    kind = block["type"]
    start: JsonObject = block
    deltas: list[JsonObject] = []
    if kind == "text":
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": block["text"]}] if block["text"] else []
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
    # redacted_thinking and server blocks arrive whole, in their start event
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def sse_response(message: Mapping[str, Any]) -> httpx2.Response:
    """``message`` as the API streams it (``text/event-stream``)."""
    body = "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
        for event in message_events(message)
    )
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body.encode()
    )


def error_response(status: int, error_type: str, message: str) -> httpx2.Response:
    """An API error response, such as ``error_response(529, "overloaded_error", "Overloaded")``."""
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": error_type, "message": message}},
        headers={"request-id": "req_test"},
    )


def mock_client_factory(handler: Handler) -> ClientFactory:
    """A factory of ``AsyncAnthropic`` clients whose requests go to ``handler``."""

    def build() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key="test-key",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        )

    return build


def response_message(
    content: Sequence[JsonObject],
    *,
    message_id: str = "msg_test",
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = SCRIPTED_MODEL,
) -> JsonObject:
    """A complete Messages API response with ``content``."""
    uses_tools = any(block["type"] == "tool_use" for block in content)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason or ("tool_use" if uses_tools else "end_turn"),
        "stop_sequence": None,
        "usage": dict(usage or {"input_tokens": 10, "output_tokens": 5}),
    }


_MOVED_TO_CONFORMANCE = frozenset({"ScriptedMessagesEndpoint", "scenario_tool"})


def __getattr__(name: str) -> object:
    """The suite's names that moved to ``conformance``, with a ``DeprecationWarning``."""
    if name not in _MOVED_TO_CONFORMANCE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} is deprecated; use dex_agents_claude_sdk.conformance.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    # Imported here: the conformance module imports this one.
    from dex_agents_claude_sdk import conformance

    return getattr(conformance, name)
