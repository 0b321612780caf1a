"""A model that returns malformed tool calls: bad JSON arguments, unknown tools,
duplicate call IDs, and a tool whose output is too large to store. Each ends in a
clear result for the model or a clear turn failure; the session keeps working."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from dex_agents import AgentSnapshot, ToolEffect
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow, function_tool
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
from dex_local_engine import LocalEngine

ENORMOUS = 3 * 1024 * 1024  # past the engine's 2 MiB max_value_bytes


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}"


@function_tool(effect=ToolEffect.READ)
def dump() -> str:
    """Return far too much."""
    return "z" * ENORMOUS


def _turn_text(request: ModelRequest) -> str:
    return ScriptedModelClient.user_texts(request)[-1]


def script(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(
            text="; ".join(f"{r.tool_name} -> {r.output[:300]}" for r in results)
        )
    calls = {
        "bad json": [ScriptedToolCall("lookup", '{"order_id": ')],
        "wrong args": [ScriptedToolCall("lookup", {"nope": 1})],
        "unknown tool": [ScriptedToolCall("no_such_tool", {})],
        "duplicate ids": [
            ScriptedToolCall("lookup", {"order_id": "1"}, call_id="same"),
            ScriptedToolCall("lookup", {"order_id": "2"}, call_id="same"),
        ],
        "enormous": [ScriptedToolCall("dump", {})],
    }.get(_turn_text(request))
    if calls is None:
        return ScriptedModelReply(text=f"plain answer to {_turn_text(request)}")
    return ScriptedModelReply(tool_calls=calls)


@pytest.fixture
async def session() -> AsyncIterator[Callable[[str], Any]]:
    flow = create_stepwise_session_flow(
        AgentDefinition(
            name="malformed",
            instructions="",
            model=ScriptedModelClient(script),
            tools=[lookup, dump],
            # A call of an unknown tool gets the session default (call_policy); with
            # read it needs no approval, so it fails for the model at once.
            default_tool_effect=ToolEffect.READ,
        ),
        "MalformedToolCalls",
    )
    with LocalEngine() as engine:
        environment = await AgentTestEnvironment.start(
            flows=[flow], server_address=engine.address, worker_in_process=True
        )
        sessions = AgentSessionTestClient(environment.client, flow)
        await sessions.start_session("s", "hello")
        await sessions.wait_for_completed_turns("s", 1)
        turns = [1]

        async def send(text: str) -> AgentSnapshot:
            assert await sessions.send_user_message("s", text)
            turns[0] += 1
            return await sessions.wait_for_completed_turns("s", turns[0])

        try:
            yield send
        finally:
            await environment.client.stop_flow("s")
            await environment.close()


expected = {
    "bad json": "invalid arguments",
    "wrong args": "invalid arguments",
    "unknown tool": "unknown tool",
    "enormous": "max_value_bytes",
}


@pytest.mark.parametrize(
    "kind", ["bad json", "wrong args", "unknown tool", "duplicate ids", "enormous"]
)
async def test_a_malformed_tool_call_ends_clearly_and_the_session_goes_on(
    session: Callable[[str], Any], kind: str
) -> None:
    snapshot: AgentSnapshot = await session(kind)
    assert snapshot.state is not None
    last = snapshot.messages[-1]
    if kind == "duplicate ids":
        # A runner defect the session names; the turn fails and nothing runs twice.
        assert "appears twice" in (snapshot.state.last_turn_error or "")
    else:
        # The model saw the failure as the call's result and answered.
        assert snapshot.state.last_turn_error is None
        assert last.role == "assistant"
        assert expected[kind] in last.text, last.text
    # Every call is paired with a final record.
    for record in snapshot.tool_calls:
        assert record.status.value in ("succeeded", "failed", "rejected", "outcome_unknown")
    after = await session("and now?")
    assert after.messages[-1].text == "plain answer to and now?"
