"""OpenAIAgentsRunner's compaction methods, with the SDK's own ScriptedModel."""

from __future__ import annotations

import json
from dataclasses import replace

from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents import ToolEffect
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    ToolCallsRequested,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import ContextSummary
from dex_agents_openai_agents import OpenAIAgentsRunner, declare_tool_effect


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


declare_tool_effect(lookup_order, ToolEffect.READ)


async def test_compaction_methods_cut_summarize_and_lead_with_the_summary() -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup_order", {"order_id": "1"}, call_id="c1")]),
            ModelStep(output=[assistant_message("It shipped.")]),
            ModelStep(output=[assistant_message("the summary")]),
            ModelStep(output=[assistant_message("Hello again.")]),
        ]
    )
    agent = Agent(name="shop", instructions="You run a shop.", model=model, tools=[lookup_order])
    runner = OpenAIAgentsRunner(agent)
    session = RunnerDriver(runner)
    session.start_turn("Where is order 1?")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    await session.run_tools()
    await session.run_model()
    turn = replace(session.context(), framework_run_state=None)
    assert await runner.estimate_input_tokens(turn) > 10
    kinds = [json.loads(m.framework_item).get("type") for m in turn.messages]
    output_at = kinds.index("function_call_output")
    # No cut falls between the call and its output.
    assert await runner.select_compaction_cutoff(turn, 0) == turn.messages[output_at].sequence
    assert await runner.select_compaction_cutoff(turn, 10_000) == turn.messages[0].sequence

    result = await runner.summarize_context(summary_request(turn))
    assert result.summary == "the summary"
    assert result.usage.model_calls == 1
    summary_call = model.calls[-1]
    assert summary_call.system_instructions == CONTEXT_SUMMARY_INSTRUCTIONS
    assert summary_call.tools == []
    assert "Where is order 1?" in json.dumps(summary_call.input)

    last = turn.messages[-1].sequence
    summary = ContextSummary(generation=1, last_sequence=last, summary="the summary")
    session.start_turn("Hi")
    later = replace(session.context(), context_summary=summary)
    later = replace(later, messages=tuple(m for m in later.messages if m.sequence > last))
    await runner.run_model_step(later)
    sent = model.calls[-1].input
    assert isinstance(sent, list)
    assert str(sent[0].get("content")).startswith(CONTEXT_SUMMARY_NOTE_HEADER)
