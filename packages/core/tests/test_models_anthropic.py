"""AnthropicModelClient over httpx2.MockTransport: real SSE shapes, no network."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest

from dex_agents.models import (
    AnthropicModelClient,
    ModelOutputItem,
    ModelRequest,
    ModelSettings,
    ModelToolCall,
    ModelToolDefinition,
    RecordingStreamSink,
    ToolResultItem,
    UserTextItem,
)


def sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def message_start(message_id: str) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-7",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 50,
                "output_tokens": 1,
                "cache_read_input_tokens": 200,
                "cache_creation_input_tokens": 10,
            },
        },
    }


def thinking_and_tool_stream() -> bytes:
    return sse(
        [
            message_start("msg_01"),
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "The user wants "},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "order 42."},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "EqQBsig=="},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBredacted"},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "text_delta", "text": "Let me "},
            },
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "text_delta", "text": "check."},
            },
            {"type": "content_block_stop", "index": 2},
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "lookup_order",
                    "input": {},
                },
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": '{"order_'},
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": 'id": "42"}'},
            },
            {"type": "content_block_stop", "index": 3},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 64},
            },
            {"type": "message_stop"},
        ]
    )


def answer_stream() -> bytes:
    return sse(
        [
            message_start("msg_02"),
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "It shipped."},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
    )


class Provider:
    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        self.requests.append(json.loads(request.content))
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.bodies.pop(0)
        )

    def client(self) -> AnthropicModelClient:
        sdk = anthropic.AsyncAnthropic(
            api_key="test-key",
            base_url="https://api.anthropic.test",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )
        return AnthropicModelClient("claude-sonnet-4-7", client=sdk)


LOOKUP = ModelToolDefinition(
    name="lookup_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
)

STORED_BLOCKS = [
    {"type": "thinking", "thinking": "The user wants order 42.", "signature": "EqQBsig=="},
    {"type": "redacted_thinking", "data": "EmwKAhgBredacted"},
    {"type": "text", "text": "Let me check."},
    {"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": {"order_id": "42"}},
]


async def test_streams_thinking_and_text_and_keeps_signatures() -> None:
    provider = Provider([thinking_and_tool_stream()])
    sink = RecordingStreamSink()
    response = await provider.client().generate(
        ModelRequest(
            instructions="Help with orders.",
            items=(UserTextItem("Where is order 42?"),),
            tools=(LOOKUP,),
            settings=ModelSettings(
                max_output_tokens=2048,
                provider_options={"thinking": {"type": "enabled", "budget_tokens": 1024}},
            ),
        ),
        sink,
    )
    assert sink.text == ["Let me ", "check."]
    assert sink.reasoning == ["The user wants ", "order 42."]
    assert response.output.provider == "anthropic"
    assert response.output.api == "messages"
    assert response.output.item == STORED_BLOCKS
    assert response.output.text == "Let me check."
    assert response.output.tool_calls == (
        ModelToolCall("toolu_01", "lookup_order", '{"order_id":"42"}'),
    )
    usage = response.usage
    assert usage.model_calls == 1
    assert usage.input_tokens == 260  # 50 + 200 cache read + 10 cache write
    assert usage.output_tokens == 64
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (200, 10)
    assert usage.total_tokens == 324
    assert response.metadata.finish_reasons == ("tool_use",)

    sent = provider.requests[0]
    assert sent["stream"] is True
    assert sent["system"] == "Help with orders."
    assert sent["max_tokens"] == 2048
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent["tools"] == [
        {
            "name": "lookup_order",
            "description": "Look up an order.",
            "input_schema": LOOKUP.parameters,
        }
    ]
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 42?"}]}
    ]


async def test_replays_thinking_blocks_unchanged_with_results_first() -> None:
    provider = Provider([thinking_and_tool_stream(), answer_stream()])
    client = provider.client()
    first = await client.generate(
        ModelRequest(instructions="", items=(UserTextItem("Where is order 42?"),)),
        RecordingStreamSink(),
    )
    second = await client.generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("Where is order 42?"),
                first.output,
                ToolResultItem("toolu_01", "lookup_order", "shipped"),
                UserTextItem("[note] also check 43"),
            ),
        ),
        RecordingStreamSink(),
    )
    assert second.output.text == "It shipped."
    assert second.usage.output_tokens == 5
    assert provider.requests[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 42?"}]},
        {"role": "assistant", "content": STORED_BLOCKS},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "shipped"},
                {"type": "text", "text": "[note] also check 43"},
            ],
        },
    ]


async def test_another_providers_output_is_given_as_text_and_tool_use() -> None:
    provider = Provider([answer_stream()])
    foreign = ModelOutputItem(
        provider="openai",
        api="responses",
        item=[{"type": "reasoning", "id": "rs_1", "encrypted_content": "x", "summary": []}],
        text="Looking.",
        tool_calls=(ModelToolCall("call_9", "lookup_order", '{"order_id":"9"}'),),
    )
    await provider.client().generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("order 9?"),
                foreign,
                ToolResultItem("call_9", "lookup_order", "ok"),
            ),
        ),
        RecordingStreamSink(),
    )
    assert provider.requests[0]["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {
                "type": "tool_use",
                "id": "call_9",
                "name": "lookup_order",
                "input": {"order_id": "9"},
            },
        ],
    }
    assert provider.requests[0]["max_tokens"] == 8192


async def test_http_error_raises_without_retry() -> None:
    calls = 0

    def handle(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return httpx2.Response(
            529,
            json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )

    sdk = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="https://api.anthropic.test",
        max_retries=4,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    with pytest.raises(anthropic.APIStatusError):
        await AnthropicModelClient("claude-sonnet-4-7", client=sdk).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )
    assert calls == 1


async def test_history_with_tool_use_but_no_offered_tools_defines_them_with_tool_choice_none() -> (
    None
):
    provider = Provider([thinking_and_tool_stream(), answer_stream()])
    client = provider.client()
    first = await client.generate(
        ModelRequest(instructions="", items=(UserTextItem("order 42?"),), tools=(LOOKUP,)),
        RecordingStreamSink(),
    )
    await client.generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("order 42?"),
                first.output,
                ToolResultItem("toolu_01", "lookup_order", "shipped"),
            ),
        ),
        RecordingStreamSink(),
    )
    sent = provider.requests[1]
    assert [tool["name"] for tool in sent["tools"]] == ["lookup_order"]
    assert sent["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in provider.requests[0]
