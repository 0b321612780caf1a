"""Each provider's client reaches its own endpoint with the key from the server's
environment: a real chat turn per provider over httpx2.MockTransport, no network."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from dex_agents.models import (
    AnthropicModelClient,
    ModelClient,
    ModelRequest,
    OpenAIChatModelClient,
    OpenAIResponsesModelClient,
    RecordingStreamSink,
    UserTextItem,
)
from dex_agents_ai_agent.providers import create_model_client

ENVIRON = {
    "OPENAI_API_KEY": "sk-openai",
    "GROQ_API_KEY": "gsk-groq",
    "GEMINI_API_KEY": "gemini-key",
    "DEX_AGENT_CUSTOM_BASE_URL": "http://models.internal:8000/v1",
}


def chat_completion_stream() -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764400000,
        "model": "served-model",
        "choices": [{"index": 0, "delta": {"content": "Hello."}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()


class Endpoint:
    """Records each request and answers it as a Chat Completions stream."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=chat_completion_stream()
        )

    def client(self, provider: str, model: str, environ: dict[str, str]) -> ModelClient | None:
        transport = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return create_model_client(provider, model, environ, http_client=transport)


@pytest.mark.parametrize(
    ("provider", "model", "url", "key", "sent_model"),
    [
        (
            "groq",
            "groq/openai/gpt-oss-20b",
            "https://api.groq.com/openai/v1/chat/completions",
            "gsk-groq",
            "openai/gpt-oss-20b",
        ),
        (
            "gemini",
            "gemini/gemini-2.5-flash",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
            "gemini-key",
            "gemini-2.5-flash",
        ),
        (
            "custom",
            "custom/meta-llama/Llama-3.1-8B",
            "http://models.internal:8000/v1/chat/completions",
            "no-key",
            "meta-llama/Llama-3.1-8B",
        ),
    ],
)
async def test_chat_completions_providers_call_their_endpoint_with_the_server_key(
    provider: str, model: str, url: str, key: str, sent_model: str
) -> None:
    endpoint = Endpoint()
    client = endpoint.client(provider, model, ENVIRON)
    assert isinstance(client, OpenAIChatModelClient)
    response = await client.generate(
        ModelRequest(instructions="Be brief.", items=(UserTextItem("hi"),)),
        RecordingStreamSink(),
    )
    assert response.output.text == "Hello."
    assert response.output.provider == provider
    (request,) = endpoint.requests
    assert str(request.url) == url
    # The custom server gets its own key or none: never another provider's key.
    assert request.headers["authorization"] == f"Bearer {key}"
    assert json.loads(request.content)["model"] == sent_model


async def test_a_custom_server_key_comes_from_its_own_variable() -> None:
    endpoint = Endpoint()
    environ = {**ENVIRON, "DEX_AGENT_CUSTOM_API_KEY": "custom-key"}
    client = endpoint.client("custom", "custom/qwen3", environ)
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
