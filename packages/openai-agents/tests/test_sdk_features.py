"""SDK features under the runner: agent guardrails, tool_use_behavior, agents as tools."""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunContextWrapper,
    function_tool,
    input_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner

events: list[str] = []


@input_guardrail
def polite(
    context: RunContextWrapper[Any], agent: Agent[Any], text: Any
) -> GuardrailFunctionOutput:
    events.append("guardrail")
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


@function_tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    events.append(f"lookup {order_id}")
    return f"found {order_id}"


async def test_an_input_guardrail_runs_with_the_turns_first_model_call_only() -> None:
    events.clear()
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"order_id": "1"}, call_id="c1")]),
            ModelStep(output=[assistant_message("ok")]),
        ]
    )
    agent = Agent[Any](name="a", model=model, tools=[lookup], input_guardrails=[polite])
    session = Session(OpenAIAgentsRunner(agent))
    session.start_turn("hi")
    await session.run_model()
    assert events == ["guardrail"]
    await session.run_tools()
    assert isinstance(await session.run_model(), TurnCompleted)
    assert events == ["guardrail", "lookup 1"]


async def test_stop_on_first_tool_ends_the_turn_with_the_recorded_output() -> None:
    events.clear()
    model = ScriptedModel(
        [ModelStep(output=[function_call("lookup", {"order_id": "1"}, call_id="c1")])]
    )
    agent = Agent[Any](
        name="a", model=model, tools=[lookup], tool_use_behavior="stop_on_first_tool"
    )
    session = Session(OpenAIAgentsRunner(agent))
    session.start_turn("hi")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    assert events == [], "the tool is deferred even though the SDK would stop after it"
    await session.run_tools()
    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.usage.model_calls == 0
    assert [(m.role, m.tool_output) for m in final.new_messages] == [("tool", "found 1")]
    assert len(model.calls) == 1
    assert events == ["lookup 1"]


async def test_an_agent_used_as_a_tool_is_deferred_and_runs_in_the_tool_step() -> None:
    events.clear()
    sub_model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"order_id": "2"}, call_id="s1")]),
            ModelStep(output=[assistant_message("sub done")]),
        ]
    )
    sub = Agent[Any](name="sub", model=sub_model, tools=[lookup])
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("ask_sub", {"input": "go"}, call_id="t1")]),
            ModelStep(output=[assistant_message("top done")]),
        ]
    )
    top = Agent[Any](
        name="top",
        model=model,
        tools=[sub.as_tool(tool_name="ask_sub", tool_description="Ask the sub-agent.")],
    )
    session = Session(OpenAIAgentsRunner(top))
    session.start_turn("hi")
    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert [call.tool_name for call in first.tool_calls] == ["ask_sub"]
    assert events == []
    assert sub_model.calls == ()
    await session.run_tools()
    assert [record.output for record in session.records] == ["sub done"]
    assert events == ["lookup 2"], "the sub-agent's run, tools included, happens in the tool step"
    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == "top done"


def test_an_approval_the_adapter_cannot_defer_fails_clearly() -> None:
    from agents import ToolApprovalItem

    from dex_agents_openai_agents import UnsupportedInterruptionError
    from dex_agents_openai_agents._runner import (
        _function_call_of,  # pyright: ignore[reportPrivateUsage]
    )

    hosted = ToolApprovalItem(
        agent=Agent[Any](name="a"),
        raw_item={"type": "mcp_approval_request", "id": "mcpr_1", "name": "delete"},
        tool_name="delete",
    )
    with pytest.raises(UnsupportedInterruptionError, match="mcp_approval_request"):
        _function_call_of(hosted)
