"""Each provider gets its client, and the LiteLLM ones (Gemini, Groq, custom) reach
their own endpoint with the key from the server's environment: a real chat turn each
against an endpoint on loopback, with no other address resolvable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dex_agents.models import (
    AnthropicModelClient,
    LiteLLMModelClient,
    ModelRequest,
    OpenAIResponsesModelClient,
    RecordingStreamSink,
    UserTextItem,
)
from dex_agents.testing import (
    HttpAnswer,
    ScriptedHttpEndpoint,
    chat_completion_chunk,
    loopback_only,
)
from dex_agents_ai_agent.providers import create_model_client, uses_litellm

ENVIRON = {
    "OPENAI_API_KEY": "sk-openai",
    "GROQ_API_KEY": "gsk-groq",
    "GEMINI_API_KEY": "gemini-key",
    "DEX_AGENT_CUSTOM_BASE_URL": "http://models.internal:8000/v1",
}


CHAT_COMPLETION_CHUNK = chat_completion_chunk(
    {"content": "Hello."},
    finish_reason="stop",
    usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
)
GEMINI_CHUNK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Hello."}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 11},
}


@pytest.fixture
def endpoint() -> Iterator[ScriptedHttpEndpoint]:
    with loopback_only(), ScriptedHttpEndpoint() as server:
        yield server


@pytest.mark.parametrize(
    ("provider", "model", "answer", "path", "key_header", "sent_model"),
    [
        (
            "groq",
            "groq/openai/gpt-oss-20b",
            CHAT_COMPLETION_CHUNK,
            "/groq/chat/completions",
            ("authorization", "Bearer gsk-groq"),
            "openai/gpt-oss-20b",
        ),
        (
            "gemini",
            "gemini/gemini-2.5-flash",
            GEMINI_CHUNK,
            "/gemini/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            ("x-goog-api-key", "gemini-key"),
            None,
        ),
        (
            "custom",
            "custom/meta-llama/Llama-3.1-8B",
            CHAT_COMPLETION_CHUNK,
            "/v1/chat/completions",
            ("authorization", "Bearer no-key"),
            "meta-llama/Llama-3.1-8B",
        ),
    ],
)
async def test_litellm_providers_call_their_endpoint_with_the_server_key(
    endpoint: ScriptedHttpEndpoint,
    provider: str,
    model: str,
    answer: dict[str, Any],
    path: str,
    key_header: tuple[str, str],
    sent_model: str | None,
) -> None:
    endpoint.answers.append(HttpAnswer.event_stream([answer]))
    # The custom server is the environment's; Gemini's and Groq's endpoints are moved here.
    environ = {**ENVIRON, "DEX_AGENT_CUSTOM_BASE_URL": f"{endpoint.url}/v1"}
    api_base = None if provider == "custom" else f"{endpoint.url}/{provider}"
    client = create_model_client(provider, model, environ, api_base=api_base)
    assert isinstance(client, LiteLLMModelClient)
    response = await client.generate(
        ModelRequest(instructions="Be brief.", items=(UserTextItem("hi"),)),
        RecordingStreamSink(),
    )
    assert response.output.text == "Hello."
    assert response.output.provider == provider
    assert response.usage.input_tokens == 9
    (request,) = endpoint.requests
    assert request.path == path
    # The custom server gets its own key or none: never another provider's key.
    name, value = key_header
    assert request.headers[name] == value
    if sent_model is not None:
        assert request.json()["model"] == sent_model


async def test_a_custom_server_key_comes_from_its_own_variable(
    endpoint: ScriptedHttpEndpoint,
) -> None:
    endpoint.answers.append(HttpAnswer.event_stream([CHAT_COMPLETION_CHUNK]))
    environ = {
        **ENVIRON,
        "DEX_AGENT_CUSTOM_BASE_URL": f"{endpoint.url}/v1",
        "DEX_AGENT_CUSTOM_API_KEY": "custom-key",
    }
    client = create_model_client("custom", "custom/qwen3", environ)
    assert client is not None
    await client.generate(
        ModelRequest(instructions="", items=(UserTextItem("hi"),)), RecordingStreamSink()
    )
    assert endpoint.requests[0].headers["authorization"] == "Bearer custom-key"


def test_native_providers_and_mock() -> None:
    environ: dict[str, Any] = {**ENVIRON, "ANTHROPIC_API_KEY": "sk-ant"}
    assert isinstance(
        create_model_client("openai", "openai/gpt-5-mini", environ), OpenAIResponsesModelClient
    )
    assert isinstance(
        create_model_client("anthropic", "anthropic/claude-sonnet-4-5", environ),
        AnthropicModelClient,
    )
    assert create_model_client("mock", "mock/dex", environ) is None


@pytest.mark.parametrize(
    ("provider", "environ", "message"),
    [
        ("groq", {}, "set GROQ_API_KEY"),
        ("gemini", {"GEMINI_API_KEY": "  "}, "set GEMINI_API_KEY"),
        ("custom", {"DEX_AGENT_CUSTOM_API_KEY": "k"}, "set DEX_AGENT_CUSTOM_BASE_URL"),
    ],
)
def test_a_missing_setting_on_the_worker_is_a_clear_error(
    provider: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        create_model_client(provider, f"{provider}/m", environ)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"}, False),
        ({"GROQ_API_KEY": "gsk-test"}, True),
        ({"GEMINI_API_KEY": " "}, False),
        ({"DEX_AGENT_CUSTOM_BASE_URL": "http://127.0.0.1:1/v1"}, True),
    ],
)
def test_the_app_warms_litellm_up_only_when_a_provider_needs_it(
    environ: dict[str, str], expected: bool
) -> None:
    assert uses_litellm(environ) is expected
