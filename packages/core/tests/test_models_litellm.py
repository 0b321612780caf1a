"""LiteLLMModelClient against a Chat Completions server on loopback: LiteLLM's real
``acompletion`` with ``openai/<model>`` and ``api_base``, real streamed chunks, and no
address but 127.0.0.1 resolvable while a test runs."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from dex_agents.models import (
    LiteLLMModelClient,
    ModelClientError,
    ModelOutputItem,
    ModelRequest,
    ModelSettings,
    ModelToolCall,
    ModelToolDefinition,
    RecordingStreamSink,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.testing import (
    HttpAnswer,
    ScriptedHttpEndpoint,
    chat_completion_chunk,
    loopback_only,
)

MODEL = "served-model"


@pytest.fixture(autouse=True)
def no_network() -> Iterator[None]:
    with loopback_only():
        yield


@pytest.fixture
def endpoint() -> Iterator[ScriptedHttpEndpoint]:
    with ScriptedHttpEndpoint() as server:
        yield server


def client(endpoint: ScriptedHttpEndpoint, **options: Any) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        f"openai/{MODEL}", api_base=f"{endpoint.url}/v1", api_key="test-key", **options
    )


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return chat_completion_chunk(
        delta, finish_reason=finish_reason, usage=usage, model=MODEL, chunk_id="chatcmpl-7"
    )


USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 12},
}
LOOKUP = ModelToolDefinition(
    name="lookup_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


def tool_call_stream() -> HttpAnswer:
    call = {"index": 0, "id": "call_abc", "type": "function"}
    return HttpAnswer.event_stream(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"reasoning_content": "Look it up first."}),
            chunk({"content": "Check"}),
            chunk({"content": "ing."}),
            chunk(
                {"tool_calls": [{**call, "function": {"name": "lookup_order", "arguments": ""}}]}
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id":"42"}'}}]}),
            chunk(finish_reason="tool_calls"),
            chunk(usage=USAGE),
        ]
    )


def text_stream(*parts: str) -> HttpAnswer:
    return HttpAnswer.event_stream(
        [
            *(chunk({"role": "assistant", "content": part}) for part in parts),
            chunk(finish_reason="stop"),
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
        }
    ],
}


async def test_streams_a_tool_call_with_reasoning_and_usage(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    endpoint.answers.append(tool_call_stream())
    sink = RecordingStreamSink()
    request = ModelRequest(
        instructions="Help with orders.",
        items=(UserTextItem("Where is order 42?"),),
        tools=(LOOKUP,),
        tool_choice="required",
        settings=ModelSettings(temperature=0.2, max_output_tokens=500),
    )
    response = await client(endpoint).generate(request, sink)

    assert "".join(sink.text) == "Checking."
    assert sink.reasoning == ["Look it up first."]
    assert response.output.provider == "openai"
    assert response.output.api == "chat_completions"
    assert response.output.item == [STORED_CALL_MESSAGE]
    assert response.output.tool_calls == (
        ModelToolCall(call_id="call_abc", name="lookup_order", arguments='{"order_id":"42"}'),
    )
    assert response.reasoning == "Look it up first."
    usage = response.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 120, 30)
    assert (usage.total_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (150, 100, 12)
    assert response.metadata.request_model == f"openai/{MODEL}"
    assert response.metadata.response_id == "chatcmpl-7"
    assert response.metadata.finish_reasons == ("tool_calls",)

    (sent,) = endpoint.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer test-key"
    body = sent.json()
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Help with orders."},
        {"role": "user", "content": "Where is order 42?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Look up an order.",
                "parameters": LOOKUP.parameters,
            },
        }
    ]
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 500


async def test_replays_its_message_and_the_results_then_answers_in_text(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    endpoint.answers += [tool_call_stream(), text_stream("Ship", "ped.")]
    model = client(endpoint, provider="groq", include_usage=False)
    first = await model.generate(
        ModelRequest(instructions="", items=(UserTextItem("Where is order 42?"),)),
        RecordingStreamSink(),
    )
    sink = RecordingStreamSink()
    second = await model.generate(
        ModelRequest(
            instructions="",
            items=(
                UserTextItem("Where is order 42?"),
                first.output,
                ToolResultItem("call_abc", "lookup_order", "shipped"),
            ),
        ),
        sink,
    )
    assert "".join(sink.text) == "Shipped."
    assert second.output.text == "Shipped."
    assert second.output.provider == "groq"
    assert second.output.item == [{"role": "assistant", "content": "Shipped."}]
    assert second.output.tool_calls == ()
    assert second.metadata.finish_reasons == ("stop",)
    body = endpoint.requests[1].json()
    assert "stream_options" not in body
    assert body["messages"] == [
        {"role": "user", "content": "Where is order 42?"},
        STORED_CALL_MESSAGE,
        {"role": "tool", "tool_call_id": "call_abc", "content": "shipped"},
    ]


async def test_the_chat_completions_clients_output_replays_natively(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    # As OpenAIChatModelClient stores it for "groq": the same message shape, so it is
    # sent as stored (with its extra field), not reduced to text.
    stored = ModelOutputItem(
        provider="groq",
        api="chat_completions",
        item=[{"role": "assistant", "content": "Hi.", "extra": 1}],
        text="Hi.",
    )
    endpoint.answers.append(text_stream("Yes."))
    await client(endpoint, provider="groq").generate(
        ModelRequest(instructions="", items=(UserTextItem("hi"), stored, UserTextItem("ok?"))),
        RecordingStreamSink(),
    )
    assert endpoint.requests[0].json()["messages"][1] == {
        "role": "assistant",
        "content": "Hi.",
        "extra": 1,
    }


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, litellm.RateLimitError),
        (503, litellm.ServiceUnavailableError),
        (500, litellm.InternalServerError),
    ],
)
async def test_a_retryable_failure_raises_after_one_request(
    endpoint: ScriptedHttpEndpoint, status: int, error_type: type[Exception]
) -> None:
    # The session's RunModel attempt is the retry: neither LiteLLM nor the SDK under it
    # may send the request again. Each error is LiteLLM's class for the status.
    endpoint.answers += [
        HttpAnswer.json({"error": {"message": "busy", "type": "server_error"}}, status)
    ] * 3
    with pytest.raises(error_type) as raised:
        await client(endpoint).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )
    assert raised.value.status_code == status  # type: ignore[attr-defined]
    assert len(endpoint.requests) == 1


async def test_a_refused_request_is_a_bad_request_error(endpoint: ScriptedHttpEndpoint) -> None:
    endpoint.answers.append(
        HttpAnswer.json({"error": {"message": "unknown model", "type": "invalid_request"}}, 400)
    )
    with pytest.raises(litellm.BadRequestError, match="unknown model"):
        await client(endpoint).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )


async def test_an_error_inside_the_stream_raises_a_retryable_error(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    body = HttpAnswer.event_stream(
        [chunk({"content": "Hal"}), {"error": {"message": "the model broke"}}]
    )
    endpoint.answers.append(body)
    sink = RecordingStreamSink()
    with pytest.raises(litellm.ServiceUnavailableError, match="the model broke"):
        await client(endpoint).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), sink
        )
    assert len(endpoint.requests) == 1


async def test_a_nameless_tool_call_is_a_model_client_error(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    nameless = {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}
    endpoint.answers.append(
        HttpAnswer.event_stream([chunk(nameless), chunk(finish_reason="tool_calls")])
    )
    with pytest.raises(ModelClientError, match="tool call 0 without an id or a name"):
        await client(endpoint).generate(
            ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
        )


async def test_a_stream_without_usage_is_counted_without_downloading_a_tokenizer(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    # For a llama model LiteLLM would fetch a tokenizer from Hugging Face to count the
    # tokens of a stream that sent no usage; the module turned that download off.
    endpoint.answers.append(text_stream("Hello."))
    model = LiteLLMModelClient(
        "openai/llama-3.3-70b", api_base=f"{endpoint.url}/v1", api_key="test-key"
    )
    response = await model.generate(
        ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
    )
    assert response.output.text == "Hello."
    assert response.usage.output_tokens > 0, "LiteLLM counted the tokens itself"
    assert litellm.disable_hf_tokenizer_download is True


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="model"):
        LiteLLMModelClient(" ")
    with pytest.raises(ValueError, match="provider"):
        LiteLLMModelClient("openai/m", provider=" ")
    with pytest.raises(ValueError, match=re.escape("['api_base', 'stream']")):
        LiteLLMModelClient("openai/m", completion_options={"stream": False, "api_base": "x"})
    with pytest.raises(TypeError, match="include_usage"):
        LiteLLMModelClient("openai/m", include_usage="yes")  # type: ignore[arg-type]


def test_the_provider_name_defaults_to_the_models_prefix() -> None:
    assert LiteLLMModelClient("gemini/gemini-2.5-flash").provider == "gemini"
    assert LiteLLMModelClient("gpt-5-mini").provider == "litellm"


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    monkeypatch.delitem(sys.modules, "dex_agents.models._litellm", raising=False)
    with pytest.raises(ImportError, match=re.escape("dex-agents[litellm]")):
        importlib.import_module("dex_agents.models._litellm")


def test_only_the_litellm_module_imports_litellm() -> None:
    # A fresh interpreter: the core and its models package load without LiteLLM.
    code = (
        "import sys, dex_agents, dex_agents.models, dex_agents.stepwise\n"
        "print(any(name.split('.')[0] == 'litellm' for name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
