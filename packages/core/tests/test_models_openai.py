"""OpenAIResponsesModelClient over httpx2.MockTransport: real SSE shapes, no network."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import openai
import pytest

from dex_agents.models import (
    ModelClientError,
    ModelOutputItem,
    ModelRequest,
    ModelSettings,
    ModelToolCall,
    ModelToolDefinition,
    OpenAIResponsesModelClient,
    RecordingStreamSink,
    ToolResultItem,
    UserTextItem,
)


def sse(events: list[dict[str, Any]]) -> bytes:
    chunks = []
    for number, event in enumerate(events):
        event = {**event, "sequence_number": number}
        chunks.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(chunks).encode()


REASONING_ITEM = {
    "id": "rs_01",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Look the order up first."}],
    "encrypted_content": "gAAAAABencrypted-blob==",
}
CALL_ITEM = {
    "id": "fc_01",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_abc",
    "name": "lookup_order",
    "arguments": '{"order_id":"42"}',
}
MESSAGE_ITEM = {
    "id": "msg_01",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
}


def response_object(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_01",
        "object": "response",
        "created_at": 1764400000,
        "status": status,
        "model": "gpt-5-mini-2026-01-01",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        "usage": {
            "input_tokens": 120,
            "input_tokens_details": {"cached_tokens": 100},
            "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 12},
            "total_tokens": 150,
        }
        if status == "completed"
        else None,
    }


def tool_call_stream() -> bytes:
    return sse(
        [
            {"type": "response.created", "response": response_object("in_progress", [])},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**REASONING_ITEM, "summary": []},
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_01",
                "output_index": 0,
                "summary_index": 0,
                "delta": "Look the order ",
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_01",
                "output_index": 0,
                "summary_index": 0,
                "delta": "up first.",
            },
            {"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM},
            {
                "type": "response.output_text.delta",
                "item_id": "msg_01",
                "output_index": 1,
                "content_index": 0,
                "delta": "Check",
                "logprobs": [],
            },
            {
                "type": "response.output_text.delta",
                "item_id": "msg_01",
                "output_index": 1,
                "content_index": 0,
                "delta": "ing.",
                "logprobs": [],
            },
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_01",
                "output_index": 2,
                "delta": '{"order_id":"42"}',
            },
            {
                "type": "response.completed",
                "response": response_object("completed", [REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM]),
            },
        ]
    )


class Provider:
    """A scripted Responses endpoint that records each request body."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/responses"
        self.requests.append(json.loads(request.content))
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.bodies.pop(0)
        )

    def client(self) -> OpenAIResponsesModelClient:
        sdk = openai.AsyncOpenAI(
            api_key="test-key",
            base_url="https://api.openai.test/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )
        return OpenAIResponsesModelClient("gpt-5-mini", client=sdk)


LOOKUP = ModelToolDefinition(
    name="lookup_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


async def test_streams_deltas_and_returns_the_stored_output_items() -> None:
    provider = Provider([tool_call_stream()])
    sink = RecordingStreamSink()
    request = ModelRequest(
        instructions="Help with orders.",
        items=(UserTextItem("Where is order 42?"),),
        tools=(LOOKUP,),
        settings=ModelSettings(temperature=0.2, max_output_tokens=500, reasoning_effort="low"),
    )
    response = await provider.client().generate(request, sink)

    assert sink.text == ["Check", "ing."]
    assert sink.reasoning == ["Look the order ", "up first."]
    assert response.output.provider == "openai"
    assert response.output.api == "responses"
    assert response.output.item == [REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM]
    assert response.output.text == "Checking."
    assert response.output.tool_calls == (
        ModelToolCall(call_id="call_abc", name="lookup_order", arguments='{"order_id":"42"}'),
    )
    assert response.reasoning == "Look the order up first."
    usage = response.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 120, 30)
    assert (usage.total_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (150, 100, 12)
    assert response.metadata.response_id == "resp_01"
    assert response.metadata.response_model == "gpt-5-mini-2026-01-01"

    sent = provider.requests[0]
    assert sent["store"] is False
    assert sent["stream"] is True
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["instructions"] == "Help with orders."
    assert sent["input"] == [{"role": "user", "content": "Where is order 42?"}]
    assert sent["tools"][0]["name"] == "lookup_order"
    assert sent["tools"][0]["parameters"] == LOOKUP.parameters
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert sent["temperature"] == 0.2
    assert sent["max_output_tokens"] == 500


def final_answer_stream() -> bytes:
    answer = {
        **MESSAGE_ITEM,
        "id": "msg_02",
        "content": [{"type": "output_text", "text": "Shipped.", "annotations": []}],
    }
    return sse(
        [
            {"type": "response.created", "response": response_object("in_progress", [])},
            {
                "type": "response.output_text.delta",
                "item_id": "msg_02",
                "output_index": 0,
                "content_index": 0,
                "delta": "Shipped.",
                "logprobs": [],
            },
            {"type": "response.completed", "response": response_object("completed", [answer])},
        ]
    )


async def test_replays_encrypted_reasoning_unchanged_and_pairs_results() -> None:
    provider = Provider([tool_call_stream(), final_answer_stream()])
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
                ToolResultItem("call_abc", "lookup_order", "shipped"),
            ),
        ),
        RecordingStreamSink(),
    )
    assert second.output.text == "Shipped."
    assert "instructions" not in provider.requests[1]
    assert provider.requests[1]["input"] == [
        {"role": "user", "content": "Where is order 42?"},
        REASONING_ITEM,
        MESSAGE_ITEM,
        CALL_ITEM,
        {"type": "function_call_output", "call_id": "call_abc", "output": "shipped"},
    ]


async def test_another_providers_output_is_given_as_text_and_function_calls() -> None:
    provider = Provider([final_answer_stream()])
    foreign = ModelOutputItem(
        provider="anthropic",
        api="messages",
        item=[{"type": "thinking", "thinking": "hm", "signature": "sig"}],
        text="Let me look.",
        tool_calls=(ModelToolCall("toolu_1", "lookup_order", '{"order_id":"7"}'),),
    )
    await provider.client().generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("order 7?"),
                foreign,
                ToolResultItem("toolu_1", "lookup_order", "lost"),
            ),
        ),
        RecordingStreamSink(),
    )
    assert provider.requests[0]["input"] == [
        {"role": "user", "content": "order 7?"},
        {"role": "assistant", "content": "Let me look."},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "lookup_order",
            "arguments": '{"order_id":"7"}',
        },
        {"type": "function_call_output", "call_id": "toolu_1", "output": "lost"},
    ]


async def test_failed_response_raises_and_the_client_never_retries() -> None:
    calls = 0

    def handle(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return httpx2.Response(
            500, json={"error": {"message": "overloaded", "type": "server_error"}}
        )

    sdk = openai.AsyncOpenAI(
        api_key="k",
        base_url="https://api.openai.test/v1",
        max_retries=5,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    client = OpenAIResponsesModelClient("gpt-5-mini", client=sdk)
    with pytest.raises(openai.InternalServerError):
        await client.generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )
    assert calls == 1


async def test_response_failed_event_raises_model_client_error() -> None:
    failed = response_object("failed", [])
    failed["error"] = {"code": "server_error", "message": "the model broke"}
    provider = Provider(
        [
            sse(
                [
                    {"type": "response.created", "response": response_object("in_progress", [])},
                    {"type": "response.failed", "response": failed},
                ]
            )
        ]
    )
    with pytest.raises(ModelClientError, match="the model broke"):
        await provider.client().generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-5-mini", True),
        ("o4-mini", True),
        ("openai/o3", True),
        ("gpt-oss-120b", True),
        ("gpt-5-chat-latest", False),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
    ],
)
async def test_encrypted_reasoning_is_asked_for_only_from_reasoning_models(
    model: str, reasoning: bool
) -> None:
    provider = Provider([final_answer_stream()])
    sdk = openai.AsyncOpenAI(
        api_key="k",
        base_url="https://api.openai.test/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(provider.handle)),
    )
    await OpenAIResponsesModelClient(model, client=sdk).generate(
        ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
    )
    assert ("include" in provider.requests[0]) is reasoning


def test_empty_model_name_is_refused() -> None:
    with pytest.raises(ValueError, match="model"):
        OpenAIResponsesModelClient("", client=openai.AsyncOpenAI(api_key="k"))


@pytest.mark.parametrize(
    ("sdk", "module", "extra"),
    [
        ("openai", "dex_agents.models._openai_responses", "dex-agents[openai]"),
        ("anthropic", "dex_agents.models._anthropic_messages", "dex-agents[anthropic]"),
    ],
)
def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, sdk: str, module: str, extra: str
) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, sdk, None)  # makes `import <sdk>` fail
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=re.escape(extra)):
        importlib.import_module(module)
