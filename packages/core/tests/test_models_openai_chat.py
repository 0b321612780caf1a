"""OpenAIChatModelClient over httpx2.MockTransport: real Chat Completions chunks, no network."""

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
    OpenAIChatModelClient,
    RecordingStreamSink,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.testing import chat_completion_chunk, sse_body

BASE_URL = "https://api.groq.test/openai/v1"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return chat_completion_chunk(
        delta,
        finish_reason=finish_reason,
        usage=usage,
        model="llama-3.3-70b-versatile",
        chunk_id="chatcmpl-01",
    )


USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 12},
}


def tool_call_stream() -> bytes:
    return sse_body(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"reasoning": "Look the order "}),
            chunk({"reasoning": "up first."}),
            chunk({"content": "Check"}),
            chunk({"content": "ing."}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_abc",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": ""},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id":"42"}'}}]}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_def",
                            "type": "function",
                            "function": {"name": "list_orders", "arguments": "{}"},
                        }
                    ]
                }
            ),
            chunk(finish_reason="tool_calls"),
            chunk(usage=USAGE),
        ]
    )


STORED_CALL_MESSAGE = {
    "role": "assistant",
    "content": "Checking.",
    "tool_calls": [
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id":"42"}'},
        },
        {
            "id": "call_def",
            "type": "function",
            "function": {"name": "list_orders", "arguments": "{}"},
        },
    ],
}


def final_answer_stream() -> bytes:
    return sse_body(
        [
            chunk({"role": "assistant", "content": "Ship"}),
            chunk({"content": "ped."}),
            chunk(finish_reason="stop"),
        ]
    )


class Provider:
    """A scripted Chat Completions endpoint that records each request body."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/openai/v1/chat/completions"
        self.requests.append(json.loads(request.content))
        self.authorizations.append(request.headers.get("authorization", ""))
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.bodies.pop(0)
        )

    def sdk(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key="test-key",
            base_url=BASE_URL,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            **options,
        )

    def client(self, **options: Any) -> OpenAIChatModelClient:
        return OpenAIChatModelClient("llama-3.3-70b-versatile", client=self.sdk(), **options)


LOOKUP = ModelToolDefinition(
    name="lookup_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


async def test_streams_deltas_and_assembles_the_stored_assistant_message() -> None:
    provider = Provider([tool_call_stream()])
    sink = RecordingStreamSink()
    request = ModelRequest(
        instructions="Help with orders.",
        items=(UserTextItem("Where is order 42?"),),
        tools=(LOOKUP,),
        settings=ModelSettings(temperature=0.2, max_output_tokens=500, reasoning_effort="low"),
    )
    response = await provider.client(provider="groq").generate(request, sink)

    assert sink.text == ["Check", "ing."]
    assert sink.reasoning == ["Look the order ", "up first."]
    assert response.output.provider == "groq"
    assert response.output.api == "chat_completions"
    assert response.output.item == [STORED_CALL_MESSAGE]
    assert response.output.text == "Checking."
    assert response.output.tool_calls == (
        ModelToolCall(call_id="call_abc", name="lookup_order", arguments='{"order_id":"42"}'),
        ModelToolCall(call_id="call_def", name="list_orders", arguments="{}"),
    )
    assert response.reasoning == "Look the order up first."
    usage = response.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 120, 30)
    assert (usage.total_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (150, 100, 12)
    assert response.metadata.response_id == "chatcmpl-01"
    assert response.metadata.response_model == "llama-3.3-70b-versatile"
    assert response.metadata.provider_name == "groq"
    assert response.metadata.finish_reasons == ("tool_calls",)

    sent = provider.requests[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "llama-3.3-70b-versatile"
    assert sent["messages"] == [
        {"role": "system", "content": "Help with orders."},
        {"role": "user", "content": "Where is order 42?"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Look up an order.",
                "parameters": LOOKUP.parameters,
            },
        }
    ]
    assert "tool_choice" not in sent
    assert sent["temperature"] == 0.2
    assert sent["max_completion_tokens"] == 500
    assert sent["reasoning_effort"] == "low"


async def test_replays_its_own_message_unchanged_and_pairs_results() -> None:
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
                ToolResultItem("call_def", "list_orders", "[42]"),
            ),
        ),
        RecordingStreamSink(),
    )
    assert second.output.text == "Shipped."
    assert second.output.item == [{"role": "assistant", "content": "Shipped."}]
    assert second.usage.model_calls == 1
    assert second.usage.input_tokens == 0  # no usage chunk in this stream
    assert provider.requests[1]["messages"] == [
        {"role": "user", "content": "Where is order 42?"},
        STORED_CALL_MESSAGE,
        {"role": "tool", "tool_call_id": "call_abc", "content": "shipped"},
        {"role": "tool", "tool_call_id": "call_def", "content": "[42]"},
    ]


async def test_another_providers_output_is_given_as_text_and_tool_calls() -> None:
    provider = Provider([final_answer_stream()])
    foreign = ModelOutputItem(
        provider="openai",
        api="responses",
        item=[{"type": "reasoning", "encrypted_content": "blob"}],
        text="",
        tool_calls=(ModelToolCall("toolu_1", "lookup_order", '{"order_id":"7"}'),),
    )
    # Same API, other provider name: not replayed natively either.
    gemini = ModelOutputItem(
        provider="gemini",
        api="chat_completions",
        item=[{"role": "assistant", "content": "native gemini", "extra": 1}],
        text="Sure.",
    )
    await provider.client(provider="groq").generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("order 7?"),
                foreign,
                ToolResultItem("toolu_1", "lookup_order", "lost"),
                gemini,
            ),
        ),
        RecordingStreamSink(),
    )
    assert provider.requests[0]["messages"] == [
        {"role": "user", "content": "order 7?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id":"7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "lost"},
        {"role": "assistant", "content": "Sure."},
    ]


async def test_required_tool_choice_and_usage_opt_out() -> None:
    provider = Provider([final_answer_stream()])
    await provider.client(include_usage=False).generate(
        ModelRequest(
            instructions="", items=(UserTextItem("plan"),), tools=(LOOKUP,), tool_choice="required"
        ),
        RecordingStreamSink(),
    )
    sent = provider.requests[0]
    assert sent["tool_choice"] == "required"
    assert "stream_options" not in sent


async def test_base_url_and_api_key_reach_the_server() -> None:
    provider = Provider([final_answer_stream()])
    # base_url/api_key build the SDK client; the transport is swapped in through with_options.
    client = OpenAIChatModelClient("gemini-2.5-flash", base_url=BASE_URL, api_key="server-key")
    client._client = client._client.with_options(  # pyright: ignore[reportPrivateUsage]
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(provider.handle))
    )
    response = await client.generate(
        ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
    )
    assert response.output.text == "Shipped."
    assert provider.authorizations == ["Bearer server-key"]


async def test_failed_response_raises_and_the_client_never_retries() -> None:
    calls = 0

    def handle(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return httpx2.Response(
            503, json={"error": {"message": "overloaded", "type": "server_error"}}
        )

    sdk = openai.AsyncOpenAI(
        api_key="k",
        base_url=BASE_URL,
        max_retries=5,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    with pytest.raises(openai.InternalServerError):
        await OpenAIChatModelClient("m", client=sdk).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )
    assert calls == 1


async def test_an_error_inside_the_stream_raises() -> None:
    body = (
        f"data: {json.dumps(chunk({'content': 'Hal'}))}\n\n"
        'data: {"error": {"message": "the model broke", "type": "server_error"}}\n\n'
    ).encode()
    provider = Provider([body])
    with pytest.raises(openai.APIError, match="the model broke"):
        await provider.client().generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )


async def test_an_empty_stream_or_a_nameless_tool_call_is_a_model_client_error() -> None:
    nameless = sse_body(
        [chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}), chunk()]
    )
    provider = Provider([b"data: [DONE]\n\n", nameless])
    client = provider.client()
    request = ModelRequest(instructions="", items=(UserTextItem("hi"),))
    with pytest.raises(ModelClientError, match="without a chunk"):
        await client.generate(request, RecordingStreamSink())
    with pytest.raises(ModelClientError, match="tool call 0 without an id or a name"):
        await client.generate(request, RecordingStreamSink())


def test_bad_arguments_are_refused() -> None:
    sdk = openai.AsyncOpenAI(api_key="k")
    with pytest.raises(ValueError, match="model"):
        OpenAIChatModelClient(" ", client=sdk)
    with pytest.raises(ValueError, match="not both"):
        OpenAIChatModelClient("m", client=sdk, base_url=BASE_URL)
    with pytest.raises(ValueError, match="provider"):
        OpenAIChatModelClient("m", client=sdk, provider="")
    with pytest.raises(TypeError, match="AsyncOpenAI"):
        OpenAIChatModelClient("m", client=object())  # type: ignore[arg-type]


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    monkeypatch.delitem(sys.modules, "dex_agents.models._openai_chat", raising=False)
    with pytest.raises(ImportError, match=re.escape("dex-agents[openai]")):
        importlib.import_module("dex_agents.models._openai_chat")
