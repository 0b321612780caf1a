"""Encrypted reasoning replays unchanged: the real Responses model over an httpx2 MockTransport."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from agents import Agent, ModelSettings, OpenAIResponsesModel, function_tool
from openai import AsyncOpenAI

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner

REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need the order."}],
    "encrypted_content": "gAAAA-opaque-ciphertext==",
}
CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "lookup_order",
    "arguments": '{"order_id":"42"}',
    "status": "completed",
}


def _message(text: str, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _response(number: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 50 * number,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 4},
            "total_tokens": 50 * number + 10,
        },
    }


def _sse(response: dict[str, Any]) -> bytes:
    created = {**response, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0, "response": created}
    ]
    for index, item in enumerate(response["output"]):
        if item["type"] == "reasoning":
            events.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": len(events),
                    "item_id": item["id"],
                    "output_index": index,
                    "summary_index": 0,
                    "delta": item["summary"][0]["text"],
                }
            )
    events.append(
        {"type": "response.completed", "sequence_number": len(events), "response": response}
    )
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


async def test_encrypted_reasoning_is_stored_and_replayed_unchanged() -> None:
    replies = [
        _response(1, [REASONING, CALL]),
        _response(2, [_message("It shipped.", "msg_1")]),
        _response(3, [_message("You are welcome.", "msg_2")]),
    ]
    requests: list[dict[str, Any]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        return httpx2.Response(
            200,
            content=_sse(replies[len(requests) - 1]),
            headers={"content-type": "text/event-stream"},
        )

    client = AsyncOpenAI(
        api_key="test",
        base_url="http://responses.test/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    agent = Agent[Any](
        name="support",
        instructions="Help.",
        model=OpenAIResponsesModel("gpt-test", client),
        model_settings=ModelSettings(store=False, response_include=["reasoning.encrypted_content"]),
        tools=[lookup_order],
    )
    session = Session(OpenAIAgentsRunner(agent))
    session.start_turn("where is 42?")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert session.events.reasoning == ["Need the order."], "reasoning summary deltas stream"
    stored_reasoning = json.loads(session.messages[1].framework_item)
    assert stored_reasoning["encrypted_content"] == REASONING["encrypted_content"]
    assert stored_reasoning["id"] == "rs_1"
    await session.run_tools()
    second = await session.run_model()
    assert isinstance(second, TurnCompleted)
    assert second.usage.model_calls == 1
    assert second.usage.input_tokens == 100, "the second response's usage, not the running total"

    session.start_turn("thanks")
    third = await session.run_model()
    assert isinstance(third, TurnCompleted)

    assert len(requests) == 3
    for request in requests[1:]:
        replayed = [item for item in request["input"] if item.get("type") == "reasoning"]
        assert replayed == [stored_reasoning], "the reasoning item goes back exactly as stored"
        assert "previous_response_id" not in request
    assert requests[1]["input"][-1] == {
        "call_id": "call_1",
        "output": "order 42 shipped",
        "type": "function_call_output",
    }
    assert requests[0]["include"] == ["reasoning.encrypted_content"]
