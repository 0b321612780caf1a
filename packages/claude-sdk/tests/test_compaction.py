"""ClaudeRunner's compaction methods over the SDK and MockTransport."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx2

from dex_agents import ToolEffect
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    ToolCallsRequested,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import ContextSummary
from dex_agents_claude_sdk import ClaudeRunner, claude_tool
from dex_agents_claude_sdk.testing import (
    error_response,
    mock_client_factory,
    response_message,
    sse_response,
)


@claude_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} shipped"


class Endpoint:
    """Answers ``count_tokens`` with a count (or an error) and messages from a list."""

    def __init__(self, *responses: dict[str, Any], count: int | None = None) -> None:
        self.responses = list(responses)
        self.count = count
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append((request.url.path, body))
        if request.url.path.endswith("/count_tokens"):
            if self.count is None:
                return error_response(404, "not_found_error", "no counting here")
            return httpx2.Response(200, json={"input_tokens": self.count})
        response = self.responses.pop(0)
        return sse_response(response) if body.get("stream") else httpx2.Response(200, json=response)


def runner_for(endpoint: Endpoint) -> ClaudeRunner:
    return ClaudeRunner(
        "claude-test-1", tools=[lookup_order], client_factory=mock_client_factory(endpoint)
    )


async def test_counts_with_the_api_and_estimates_when_it_fails() -> None:
    counted = Endpoint(count=1234)
    session = RunnerDriver(runner_for(counted))
    session.start_turn("Where is order 1?")
    assert await session.runner.estimate_input_tokens(session.context()) == 1234
    path, body = counted.requests[0]
    assert path.endswith("/v1/messages/count_tokens")
    assert body["messages"][0]["content"][0]["text"] == "Where is order 1?"
    estimated = Endpoint()
    session = RunnerDriver(runner_for(estimated))
    session.start_turn("Where is order 1?")
    assert 10 < await session.runner.estimate_input_tokens(session.context()) < 1000


async def test_cutoff_keeps_tool_use_with_its_result_and_summary_leads_the_input() -> None:
    endpoint = Endpoint(
        response_message(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "lookup_order",
                    "input": {"order_id": "1"},
                }
            ]
        ),
        response_message([{"type": "text", "text": "It shipped."}]),
        response_message([{"type": "text", "text": "the summary"}]),
        response_message([{"type": "text", "text": "Hello again."}]),
    )
    runner = runner_for(endpoint)
    session = RunnerDriver(runner)
    session.start_turn("Where is order 1?")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    await session.run_tools()
    await session.run_model()
    turn = session.context()
    # Messages: user, tool_use, tool result, answer. A cut never falls before the result.
    assert await runner.select_compaction_cutoff(turn, 0) == turn.messages[2].sequence
    assert await runner.select_compaction_cutoff(turn, 10_000) == turn.messages[0].sequence

    result = await runner.summarize_context(summary_request(turn, turn.messages[:3]))
    assert result.summary == "the summary"
    assert result.usage.model_calls == 1
    _, body = endpoint.requests[-1]
    assert body["system"] == CONTEXT_SUMMARY_INSTRUCTIONS
    assert "tools" not in body
    assert "Where is order 1?" in body["messages"][0]["content"]

    summary = ContextSummary(generation=1, last_sequence=3, summary="the summary")
    session.start_turn("Hi")
    later = replace(session.context(), context_summary=summary)
    later = replace(later, messages=tuple(m for m in later.messages if m.sequence > 3))
    await runner.run_model_step(later)
    _, body = endpoint.requests[-1]
    first = body["messages"][0]["content"][0]["text"]
    assert first.startswith(CONTEXT_SUMMARY_NOTE_HEADER)
