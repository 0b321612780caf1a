"""Stepwise sessions over the real provider SDKs (httpx2.MockTransport, no network).

Each response is stored as the provider returned it and replayed unchanged to the
same provider; another provider gets only text and tool calls, so a session can
change model between turns (here: a redeploy of the same Flow type).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.models import AnthropicModelClient, ModelClient, OpenAIResponsesModelClient
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow, function_tool
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
from dex_local_engine import LocalEngine


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


def sse(events: list[dict[str, Any]], *, numbered: bool) -> bytes:
    lines = []
    for number, event in enumerate(events):
        body = {**event, "sequence_number": number} if numbered else event
        lines.append(f"event: {event['type']}\ndata: {json.dumps(body)}\n\n")
    return "".join(lines).encode()


REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [],
    "encrypted_content": "opaque-reasoning==",
}
CALL = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "lookup_order",
    "arguments": '{"order_id":"42"}',
}


def openai_response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1764400000,
        "status": "completed",
        "model": "gpt-5-mini",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 15,
        },
    }


class OpenAIEndpoint:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        last = body["input"][-1]
        if last.get("role") == "user" and "order" in str(last.get("content")):
            output = [REASONING, CALL]
        else:
            text = "It shipped." if last.get("type") == "function_call_output" else "Hello again."
            output = [
                {
                    "id": f"msg_{len(self.requests)}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ]
        events = [{"type": "response.completed", "response": openai_response(output)}]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse(events, numbered=True)
        )

    def client(self) -> OpenAIResponsesModelClient:
        sdk = openai.AsyncOpenAI(
            api_key="k",
            base_url="https://api.openai.test/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )
        return OpenAIResponsesModelClient("gpt-5-mini", client=sdk)


class AnthropicEndpoint:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        last = body["messages"][-1]["content"]
        answered = any(block.get("type") == "tool_result" for block in last)
        start = {
            "type": "message_start",
            "message": {
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-7",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        }
        if answered:
            blocks = [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Shipped!"},
                },
                {"type": "content_block_stop", "index": 0},
            ]
            stop = "end_turn"
        else:
            blocks = [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "Look it up."},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "sig-1"},
                },
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "lookup_order",
                        "input": {},
                    },
                },
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '{"order_id": "42"}'},
                },
                {"type": "content_block_stop", "index": 1},
            ]
            stop = "tool_use"
        events = [
            start,
            *blocks,
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
            {"type": "message_stop"},
        ]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse(events, numbered=False)
        )

    def client(self) -> AnthropicModelClient:
        sdk = anthropic.AsyncAnthropic(
            api_key="k",
            base_url="https://api.anthropic.test",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )
        return AnthropicModelClient("claude-sonnet-4-7", client=sdk)


@contextlib.asynccontextmanager
async def deployment(address: str, flow: AgentSessionFlow) -> AsyncIterator[AgentSessionTestClient]:
    """One Worker generation of a Flow type (a redeploy starts another) and its client."""
    environment = await AgentTestEnvironment.start(
        flows=[flow], server_address=address, worker_in_process=True
    )
    async with environment:
        yield AgentSessionTestClient(environment.client, flow)


def support(model: ModelClient) -> AgentDefinition:
    return AgentDefinition(name="support", instructions="Help.", model=model, tools=[lookup_order])


async def test_openai_reasoning_items_are_stored_and_replayed_unchanged(
    engine: LocalEngine,
) -> None:
    endpoint = OpenAIEndpoint()
    flow = create_stepwise_session_flow(support(endpoint.client()), "StepwiseOpenAI")
    async with deployment(engine.address, flow) as sessions:
        await sessions.start_session("o-1", "order 42?")
        done = await sessions.wait_for_completed_turns("o-1", 1)
    assert done.messages[-1].text == "It shipped."
    stored = json.loads(done.messages[1].framework_item)
    assert stored["provider"] == "openai"
    assert stored["item"] == [REASONING, CALL]
    second = endpoint.requests[1]
    assert second["store"] is False
    assert second["input"] == [
        {"role": "user", "content": "order 42?"},
        REASONING,
        CALL,
        {"type": "function_call_output", "call_id": "call_1", "output": "order 42 shipped"},
    ]
    assert done.usage.model_calls == 2
    assert done.usage.reasoning_tokens == 6


async def test_a_session_changes_from_anthropic_to_openai_between_turns(
    engine: LocalEngine,
) -> None:
    claude = AnthropicEndpoint()
    first_flow = create_stepwise_session_flow(support(claude.client()), "StepwiseSwitch")
    async with deployment(engine.address, first_flow) as sessions:
        await sessions.start_session("sw-1", "order 42?")
        done = await sessions.wait_for_completed_turns("sw-1", 1)
    assert done.messages[-1].text == "Shipped!"
    # Anthropic got its own thinking block back, signature and all.
    assert claude.requests[1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Look it up.",
        "signature": "sig-1",
    }

    gpt = OpenAIEndpoint()
    second_flow = create_stepwise_session_flow(support(gpt.client()), "StepwiseSwitch")
    async with deployment(engine.address, second_flow) as sessions:
        assert await sessions.send_user_message("sw-1", "thanks")
        done = await sessions.wait_for_completed_turns("sw-1", 2)
    assert done.messages[-1].text == "Hello again."
    assert len(gpt.requests) == 1
    # OpenAI saw the Anthropic turn as text and function calls only: no thinking block.
    replayed = gpt.requests[0]["input"]
    assert replayed == [
        {"role": "user", "content": "order 42?"},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "lookup_order",
            "arguments": '{"order_id":"42"}',
        },
        {"type": "function_call_output", "call_id": "toolu_1", "output": "order 42 shipped"},
        {"role": "assistant", "content": "Shipped!"},
        {"role": "user", "content": "thanks"},
    ]
