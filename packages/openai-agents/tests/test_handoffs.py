"""Handoffs: the SDK switches agents inside one step; the target's tools stay deferred."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, function_tool, handoff
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner

charged: list[int] = []


@function_tool
def charge_card(amount: int) -> str:
    """Charge the card."""
    charged.append(amount)
    return f"charged {amount}"


async def _run_handoff(use_handoff_object: bool, *, listed_elsewhere: bool = False) -> None:
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
    if listed_elsewhere:
        # The Handoff's target is also a plain handoff of another reachable agent.
        triage.handoffs.append(Agent[Any](name="archive", model=model, handoffs=[billing]))
    handoff_agents = [billing] if use_handoff_object and not listed_elsewhere else []
    session = Session(OpenAIAgentsRunner(triage, handoff_agents=handoff_agents))
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


async def test_a_handoff_object_finds_its_target_among_the_agents_of_the_graph() -> None:
    await _run_handoff(use_handoff_object=True, listed_elsewhere=True)


def test_a_handoff_object_to_an_agent_the_runner_was_not_given_is_refused() -> None:
    billing = Agent[Any](name="billing")
    triage = Agent[Any](name="triage", handoffs=[handoff(billing)])
    with pytest.raises(ValueError, match=r"handoff to agent 'billing'.*handoff_agents"):
        OpenAIAgentsRunner(triage)


class Reason(BaseModel):
    reason: str


async def test_a_handoff_object_keeps_its_name_input_and_callback() -> None:
    reasons: list[str] = []

    async def on_handoff(context: RunContextWrapper[Any], data: Reason) -> None:
        del context
        reasons.append(data.reason)

    model = ScriptedModel(
        [
            ModelStep(output=[function_call("to_billing", {"reason": "refund"}, call_id="h1")]),
            ModelStep(output=[assistant_message("Billing here.")]),
        ]
    )
    billing = Agent[Any](name="billing", model=model, tools=[charge_card])
    triage = Agent[Any](
        name="triage",
        model=model,
        handoffs=[
            handoff(
                billing,
                tool_name_override="to_billing",
                tool_description_override="Send to billing.",
                on_handoff=on_handoff,
                input_type=Reason,
            )
        ],
    )
    session = Session(OpenAIAgentsRunner(triage, handoff_agents=[billing]))
    session.start_turn("refund please")

    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == "Billing here."
    assert reasons == ["refund"], "the original handoff's callback ran with its typed input"
    [offered] = [tool for tool in model.calls[0].handoffs]
    assert (offered.tool_name, offered.tool_description) == ("to_billing", "Send to billing.")
    assert offered.input_json_schema["properties"] == {
        "reason": {"title": "Reason", "type": "string"}
    }
    assert [tool.name for tool in model.calls[1].tools] == ["charge_card"]
