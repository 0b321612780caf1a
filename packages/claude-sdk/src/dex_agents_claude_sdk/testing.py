"""Test support: a Messages API endpoint on ``httpx2.MockTransport``, no network, no key.

``sse_response(message)`` streams a complete Messages API response the way the
API does (``message_start``, content block start/delta/stop events,
``message_delta``, ``message_stop``), so the real SDK parses it.
``mock_client_factory(handler)`` builds ``AsyncAnthropic`` clients over a
``MockTransport``. ``ScriptedMessagesEndpoint`` plays a neutral conformance
``ModelScript`` as that endpoint; it reads the turn from ``get_model_step_context()``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import anthropic
import httpx2
from anthropic.lib.tools import beta_async_tool

from dex_agents.adapter_support import (
    current_model_step_context,
    decode_model_call_count,
    get_deferred_tool_execution,
)
from dex_agents.compaction_support import estimate_text_tokens
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioTool,
    ScriptedModelFailure,
    run_scenario_tool,
)
from dex_agents.testing.script_playback import (
    play_scripted_model_call,
    play_scripted_summary,
    scripted_answer_text,
    scripted_tool_call_id,
)
from dex_agents.texts import CONTEXT_SUMMARY_INSTRUCTIONS
from dex_agents_claude_sdk import ClaudeTool
from dex_agents_claude_sdk.runner import ClientFactory

__all__ = [
    "SCRIPTED_MODEL",
    "ScriptedMessagesEndpoint",
    "error_response",
    "message_events",
    "mock_client_factory",
    "response_message",
    "scenario_tool",
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


class ScriptedMessagesEndpoint:
    """Plays a ``ModelScript`` as the Messages API (an async ``MockTransport`` handler).

    The turn and attempt come from ``get_model_step_context()``, which the
    runner sets while it sends a request, and the model call index from the
    turn's framework run state. Each request is recorded
    with ``record_model_call``; a gated response writes ``text_before_gate`` as a
    live text delta (not part of the answer) and waits on its ``FileGate``; a
    failing attempt answers HTTP 500, which the SDK raises as an API error.
    """

    def __init__(
        self, script: ModelScript, state_directory: Path, summary_gate: str | None = None
    ) -> None:
        self.script = script
        self.state_directory = Path(state_directory)
        self.summary_gate = summary_gate

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body: JsonObject = json.loads(request.content)
        if request.url.path.endswith("/count_tokens"):
            # The scripted endpoint counts one token per four characters of the request.
            return httpx2.Response(
                200, json={"input_tokens": estimate_text_tokens(request.content.decode())}
            )
        if body.get("system") == CONTEXT_SUMMARY_INSTRUCTIONS:
            # The summary call of summarize_context, which runs outside a model step.
            lines = [_content_text(m) for m in cast(list[JsonObject], body["messages"])]
            text = await play_scripted_summary(self.state_directory, self.summary_gate, lines)
            return httpx2.Response(200, json=response_message([{"type": "text", "text": text}]))
        turn = current_model_step_context()
        if turn is None:
            raise RuntimeError("ScriptedMessagesEndpoint answers only requests of ClaudeRunner")
        position = decode_model_call_count(turn.framework_run_state)
        messages = cast(list[JsonObject], body["messages"])
        try:
            response = await play_scripted_model_call(
                self.script,
                self.state_directory,
                turn_id=turn.turn_id,
                position=position,
                attempt=turn.attempt,
                history=[line for message in messages for line in _history_lines(message)],
                tool_results=_last_results(messages),
                write_text=turn.events.write_text_delta,
            )
        except ScriptedModelFailure as failure:
            # The API's way to fail a request: the SDK raises it, and RunModel is retried.
            return error_response(500, "api_error", str(failure))
        message = response_message(
            _content(response, position, messages),
            message_id=f"msg_{turn.turn_id}_{position}",
        )
        return sse_response(message) if body.get("stream") else httpx2.Response(200, json=message)


def _blocks(message: Mapping[str, Any]) -> list[JsonObject]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in cast(list[Any], content) if isinstance(b, dict)]


def _content_text(message: Mapping[str, Any]) -> str:
    return "".join(str(block.get("text", "")) for block in _blocks(message))


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in cast(list[JsonObject], content))


def _history_lines(message: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            lines.append(f"{message['role']}: {block['text']}")
        elif kind == "tool_use":
            lines.append(f"assistant: -> {block['name']}")
        elif kind == "tool_result":
            lines.append(f"tool {block['tool_use_id']}: {_result_text(block)}")
    return lines


def _last_results(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The ``tool_result`` blocks answering the last response: what this call got for it."""
    if not messages or messages[-1]["role"] != "user":
        return {}
    return {
        str(b["tool_use_id"]): _result_text(b)
        for b in _blocks(messages[-1])
        if b.get("type") == "tool_result"
    }


def _turn_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(tool name, result)`` of every result since the turn's user message."""
    start = 0
    for index, message in enumerate(messages):
        if message["role"] == "user" and any(b.get("type") == "text" for b in _blocks(message)):
            start = index + 1
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in messages[start:]:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                names[str(block["id"])] = str(block["name"])
            elif block.get("type") == "tool_result":
                tool_use_id = str(block["tool_use_id"])
                results.append((names.get(tool_use_id, tool_use_id), _result_text(block)))
    return results


def _content(
    response: ModelTurn, position: int, messages: Sequence[Mapping[str, Any]]
) -> list[JsonObject]:
    if response.tool_calls:
        return [
            {
                "type": "tool_use",
                "id": scripted_tool_call_id(spec, position, index),
                "name": spec.tool_name,
                "input": dict(spec.arguments),
            }
            for index, spec in enumerate(response.tool_calls)
        ]
    text = scripted_answer_text(response, lambda: _turn_results(messages))
    return [{"type": "text", "text": text}]


_ANY_OBJECT_SCHEMA: JsonObject = {"type": "object", "properties": {}, "additionalProperties": True}


def scenario_tool(tool: ScenarioTool, state_directory: Path) -> ClaudeTool:
    """``tool`` as a Claude tool (an SDK ``beta_async_tool``) with the scenario's effect."""
    directory = Path(state_directory)

    async def run(**arguments: Any) -> str:
        execution = get_deferred_tool_execution()
        return await run_scenario_tool(
            tool,
            json.dumps(arguments, sort_keys=True),
            state_directory=directory,
            idempotency_key=execution.idempotency_key,
            attempt=execution.attempt,
        )

    function_tool = beta_async_tool(
        run, name=tool.name, description=tool.description, input_schema=_ANY_OBJECT_SCHEMA
    )
    return ClaudeTool(function_tool, effect=tool.effect, requires_approval=tool.requires_approval)
