"""Claude sessions on the local engine (in-process Worker), the SDK talking to MockTransport."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from dex_agents import ToolEffect
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)
from dex_agents_claude_sdk import claude_tool, create_claude_session_flow
from dex_agents_claude_sdk.testing import (
    error_response,
    mock_client_factory,
    response_message,
    sse_response,
)
from dex_local_engine import LocalEngine


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


class Endpoint:
    def __init__(self, *responses: httpx2.Response | dict[str, Any]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        response = self.responses[len(self.requests) - 1]
        return response if isinstance(response, httpx2.Response) else sse_response(response)


@claude_tool(effect=ToolEffect.READ)
def check_stock(sku: str) -> str:
    """Read the stock of a product."""
    return f"{sku}: 4 left"


async def test_a_provider_error_is_a_run_model_retry_and_tools_run_in_their_own_steps(
    engine: LocalEngine,
) -> None:
    thinking = {"type": "thinking", "thinking": "Check stock.", "signature": "c2ln"}
    endpoint = Endpoint(
        error_response(529, "overloaded_error", "Overloaded"),
        response_message(
            [
                thinking,
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "check_stock",
                    "input": {"sku": "A1"},
                },
            ],
            usage={"input_tokens": 20, "output_tokens": 8},
        ),
        error_response(500, "api_error", "Internal server error"),
        response_message(
            [{"type": "text", "text": "A1 has 4 left."}],
            usage={"input_tokens": 40, "output_tokens": 6},
        ),
    )
    flow = create_claude_session_flow(
        "claude-test-1",
        f"ClaudeAgent{uuid.uuid4().hex[:8]}",
        tools=[check_stock],
        client_factory=mock_client_factory(endpoint),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    environment = await AgentTestEnvironment.start(
        server_address=engine.address, flows=[flow], worker_in_process=True
    )
    try:
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"claude-{uuid.uuid4().hex[:8]}"
        await sessions.start_session(session_id, "Is A1 in stock?")
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        history = await read_step_history(engine.address, session_id)
        events = await sessions.read_events_through_turn(session_id, "turn-1")
    finally:
        await environment.close()

    assert len(endpoint.requests) == 4
    assert endpoint.requests[0] == endpoint.requests[1]  # the rerun sends the same request
    assert endpoint.requests[2] == endpoint.requests[3]
    assert endpoint.requests[3]["messages"][1]["content"][0] == thinking
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "assistant"]
    assert snapshot.messages[-1].text == "A1 has 4 left."
    assert (snapshot.usage.model_calls, snapshot.usage.input_tokens) == (2, 60)
    assert executed_step_types(history) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "ResumeTurn",
        "RunModel",
    ]
    run_model_attempts = [e.attempt for e in events if e.type == "reasoning_delta"]
    assert run_model_attempts == [2]
