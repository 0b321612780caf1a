"""Pydantic AI's real AnthropicModel over httpx2.MockTransport: what reaches the provider.

The model step offers the agent's real tool definitions, and the next request
replays the stored response unchanged (thinking signature and redacted thinking
included), with each call's recorded result, a rejection with its message.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from dex_agents import AgentToolCallStatus, ToolEffect
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents_pydantic_ai import PydanticAIRunner, dex_tool_metadata

FIRST_RESPONSE: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "Look it up, then refund.", "signature": "EqQBCkYIBxgC-sig"},
    {"type": "redacted_thinking", "data": "ENCRYPTED-REDACTED-BLOB"},
    {"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": {"order_id": "42"}},
    {"type": "tool_use", "id": "toolu_02", "name": "refund_order", "input": {"order_id": "42"}},
]


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _streamed_message(message_id: str, blocks: list[dict[str, Any]], stop_reason: str) -> bytes:
    """The Messages API's server-sent events for one message made of ``blocks``."""
    usage = {"input_tokens": 100, "output_tokens": 1}
    events = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        start: dict[str, Any]
        deltas: list[dict[str, Any]] = []
        if block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        elif block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            start = block
        events.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.extend(
            _event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}
            )
            for d in deltas
        )
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return "".join(events).encode()


async def test_the_provider_gets_the_tools_and_the_stored_response_unchanged() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            content = _streamed_message("msg_1", FIRST_RESPONSE, "tool_use")
        else:
            content = _streamed_message(
                "msg_2", [{"type": "text", "text": "Order 42 shipped; no refund."}], "end_turn"
            )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    http_client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = AnthropicModel(
        "claude-sonnet-5-5",
        provider=AnthropicProvider(api_key="test-key", http_client=http_client),
    )
    agent = Agent(model, instructions="You handle refunds.")

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id} shipped"

    @agent.tool_plain(requires_approval=True)
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        raise AssertionError("a rejected refund must not run")

    session = Session(PydanticAIRunner(agent))
    session.start_turn("Refund order 42")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert [(c.tool_call_id, c.policy.requires_approval) for c in first.tool_calls] == [
        ("toolu_01", False),
        ("toolu_02", True),
    ]
    assert first.model_call_metadata is not None
    assert first.model_call_metadata.response_id == "msg_1"
    offered = {tool["name"]: tool for tool in bodies[0]["tools"]}
    assert offered["lookup_order"]["input_schema"]["properties"] == {"order_id": {"type": "string"}}
    assert offered["lookup_order"]["description"] == "Look up an order."

    await session.runner.execute_deferred_tool_call(session.execution(session.record("toolu_01")))
    session.finish("toolu_01", AgentToolCallStatus.SUCCEEDED, output="order 42 shipped")
    session.finish(
        "toolu_02", AgentToolCallStatus.REJECTED, rejection_message="Refunds need a manager."
    )
    final = await session.run_model()

    assert isinstance(final, TurnCompleted)
    assert len(bodies) == 2
    replayed = bodies[1]["messages"]
    assert replayed[1] == {"role": "assistant", "content": FIRST_RESPONSE}
    results = {block["tool_use_id"]: block for block in replayed[2]["content"]}
    assert results["toolu_01"]["content"] == [{"type": "text", "text": "order 42 shipped"}]
    assert "Refunds need a manager." in json.dumps(results["toolu_02"]["content"])
    assert final.new_messages[-1].text == "Order 42 shipped; no refund."
