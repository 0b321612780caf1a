"""PydanticAIRunner's compaction methods, driven directly with Pydantic AI's FunctionModel."""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from dex_agents import ToolEffect
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    ToolCallsRequested,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import ContextSummary
from dex_agents_pydantic_ai import PydanticAIRunner, dex_tool_metadata


class Script:
    def __init__(self, *responses: ModelResponse) -> None:
        self.responses = list(responses)
        self.calls: list[tuple[list[ModelMessage], AgentInfo]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append((list(messages), info))
        return self.responses.pop(0)


def reply(*parts: TextPart | ToolCallPart) -> ModelResponse:
    return ModelResponse(parts=list(parts), usage=RequestUsage(input_tokens=20, output_tokens=4))


async def test_compaction_methods_cut_summarize_and_lead_with_the_summary() -> None:
    script = Script(
        reply(ToolCallPart("lookup_order", {"order_id": "1"}, tool_call_id="c1")),
        reply(TextPart("It shipped.")),
        reply(TextPart("the summary")),
        reply(TextPart("Hello again.")),
    )
    agent = Agent(FunctionModel(script), instructions="You run a shop.")

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(order_id: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Look up an order."""
        return f"order {order_id} shipped"

    runner = PydanticAIRunner(agent)
    session = RunnerDriver(runner)
    session.start_turn("Where is order 1?")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    await session.run_tools()
    await session.run_model()
    turn = session.context()
    assert await runner.estimate_input_tokens(turn) > 10
    # user, call, return, answer: no cut falls between the call and its return.
    assert await runner.select_compaction_cutoff(turn, 0) == turn.messages[-2].sequence
    assert await runner.select_compaction_cutoff(turn, 10_000) == turn.messages[0].sequence

    result = await runner.summarize_context(summary_request(turn))
    assert result.summary == "the summary"
    assert result.usage.model_calls == 1
    messages, info = script.calls[-1]
    assert info.function_tools == []
    first = messages[0]
    assert isinstance(first, ModelRequest)
    assert first.instructions == CONTEXT_SUMMARY_INSTRUCTIONS
    prompt = next(p for p in first.parts if isinstance(p, UserPromptPart))
    assert "Where is order 1?" in str(prompt.content)

    summary = ContextSummary(generation=1, last_sequence=4, summary="the summary")
    session.start_turn("Hi")
    later = replace(session.context(), context_summary=summary)
    later = replace(later, messages=tuple(m for m in later.messages if m.sequence > 4))
    await runner.run_model_step(later)
    messages, _ = script.calls[-1]
    lead = messages[0]
    assert isinstance(lead, ModelRequest)
    text = next(p for p in lead.parts if isinstance(p, UserPromptPart)).content
    assert str(text).startswith(CONTEXT_SUMMARY_NOTE_HEADER)
