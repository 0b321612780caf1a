"""Handoffs: the SDK switches agents inside one step; the target's tools stay deferred."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, function_tool, handoff
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents import ToolCallsRequested, TurnCompleted
from dex_agents.testing.runner_driver import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner

charged: list[int] = []


@function_tool
def charge_card(amount: int) -> str:
    """Charge the card."""
    charged.append(amount)
    return f"charged {amount}"


async def _run_handoff(use_handoff_object: bool) -> None:
    charged.clear()
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("transfer_to_billing", {}, call_id="h1")]),
            ModelStep(output=[function_call("charge_card", {"amount": 5}, call_id="c1")]),
            ModelStep(output=[assistant_message("Charged.")]),
        ]
    )
    billing = Agent[Any](name="billing", model=model, tools=[charge_card])
    triage = Agent[Any](
        name="triage",
        model=model,
        handoffs=[handoff(billing) if use_handoff_object else billing],
    )
    session = Session(OpenAIAgentsRunner(triage))
    session.start_turn("charge me 5")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert first.usage.model_calls == 2, "the handoff's second model call is in the same step"
    [call] = first.tool_calls
    assert call.tool_name == "charge_card"
    assert json.loads(call.tool_source_reference or "{}") == {"agent": "billing"}
    assert charged == [], "the target agent's tool is deferred too"

    await session.run_tools()
    assert charged == [5]
    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == "Charged."
    assert charged == [5]
    assert len(model.calls) == 3
    # The resumed call ran as the billing agent: it was offered billing's tool.
    assert [tool.name for tool in model.calls[2].tools] == ["charge_card"]


async def test_a_handoff_to_an_agent_keeps_its_tools_deferred() -> None:
    await _run_handoff(use_handoff_object=False)


async def test_a_handoff_object_keeps_its_target_tools_deferred() -> None:
    await _run_handoff(use_handoff_object=True)
