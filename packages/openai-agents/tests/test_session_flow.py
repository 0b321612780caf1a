"""The real session Flow on the real local engine, with an SDK agent and function tools."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool

from dex_agents import AgentSessionOptions, AgentToolCallStatus, ToolEffect
from dex_agents.runner import get_deferred_tool_execution, get_model_step_context
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    ModelScript,
    ModelTurn,
    ToolCallSpec,
)
from dex_agents_openai_agents import create_openai_agents_session_flow, declare_tool_effect
from dex_agents_openai_agents.conformance import ScenarioModel
from dex_local_engine import LocalEngine

ran: list[str] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    ran.append(f"lookup {order_id}")
    return f"order {order_id} shipped"


@function_tool(needs_approval=True)
def charge_card(amount: int) -> str:
    """Charge the card."""
    ran.append(f"charge {amount} {get_deferred_tool_execution().idempotency_key}")
    return f"charged {amount}"


declare_tool_effect(lookup_order, ToolEffect.READ)
declare_tool_effect(charge_card, ToolEffect.NON_IDEMPOTENT_WRITE)


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


class RecordingModel(ScenarioModel):
    """The conformance model (deterministic on retries), remembering each call's input."""

    def __init__(self, script: ModelScript, state_directory: Path) -> None:
        super().__init__(script, state_directory)
        self.inputs: dict[str, list[Any]] = {}

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        turn = get_model_step_context()
        self.inputs.setdefault(turn.turn_id, []).append(copy.deepcopy(args[1]))
        async for event in super().stream_response(*args, **kwargs):
            yield event


async def test_approval_turn_and_a_second_turn_on_the_engine(
    engine: LocalEngine, tmp_path: Path
) -> None:
    model = RecordingModel(
        ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("charge_card", {"amount": 5}, "call_charge"),
                        ToolCallSpec("lookup_order", {"order_id": "42"}, "call_lookup"),
                    ]
                ),
                ModelTurn(text="Charged 5; order 42 shipped."),
                ModelTurn(text="You are welcome."),
            ]
        ),
        tmp_path,
    )
    agent = Agent[Any](
        name="support", instructions="Help.", model=model, tools=[lookup_order, charge_card]
    )
    flow = create_openai_agents_session_flow(
        agent, "OpenAIAgentsSupport", AgentSessionOptions(default_tool_effect=ToolEffect.READ)
    )
    async with await AgentTestEnvironment.start(
        server_address=engine.address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        await sessions.start_session("s-1", "charge 5 and find 42")
        interrupt = await sessions.wait_for_pending_interrupt("s-1", "charge_card")
        await sessions.wait_for_tool_call("s-1", "call_lookup", AgentToolCallStatus.SUCCEEDED)
        assert ran == ["lookup 42"]
        assert await sessions.resolve_interrupt("s-1", interrupt.interrupt_id, True)
        snapshot = await sessions.wait_for_completed_turns("s-1", 1)
        assert ran == ["lookup 42", "charge 5 s-1/turn-1/call_charge"]

        assert await sessions.send_user_message("s-1", "thanks")
        snapshot = await sessions.wait_for_completed_turns("s-1", 2)

    items = [json.loads(m.framework_item) for m in snapshot.messages]
    assert [item.get("type", item.get("role")) for item in items] == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "user",
        "message",
    ]
    outputs = {item["call_id"]: item["output"] for item in items[3:5]}
    assert outputs == {"call_charge": "charged 5", "call_lookup": "order 42 shipped"}
    assert [m.text for m in snapshot.messages if m.role == "assistant" and m.text] == [
        "Charged 5; order 42 shipped.",
        "You are welcome.",
    ]
    assert snapshot.usage.model_calls == 3
    third_input = model.inputs["turn-2"][-1]
    assert third_input[:-1] == items[:6], "the next turn replays the stored items unchanged"
