"""LangGraphRunner's compaction methods, with a recording chat model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    ToolCallsRequested,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import ContextSummary
from dex_agents_langgraph import LangGraphRunner


class ListChatModel(BaseChatModel):
    """Answers with ``responses`` in order; ``calls`` holds each call's input messages."""

    responses: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])

    @property
    def _llm_type(self) -> str:
        return "list"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.responses[len(self.calls) - 1])])


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} shipped"


async def test_compaction_methods_cut_summarize_and_lead_with_the_summary() -> None:
    call = {"id": "c1", "name": "lookup_order", "args": {"order_id": "1"}, "type": "tool_call"}
    model = ListChatModel(
        responses=[
            AIMessage(content="", tool_calls=[call]),
            AIMessage(content="It shipped."),
            AIMessage(content="the summary"),
            AIMessage(content="Hello again."),
        ]
    )
    runner = LangGraphRunner.from_chat_model(model, [lookup_order])
    session = RunnerDriver(runner)
    session.start_turn("Where is order 1?")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    await session.run_tools()
    await session.run_model()
    turn = session.context()
    assert await runner.estimate_input_tokens(turn) > 5
    # user, call, result, answer: no cut falls between the call and its result.
    assert await runner.select_compaction_cutoff(turn, 0) == turn.messages[-2].sequence
    assert await runner.select_compaction_cutoff(turn, 10_000) == turn.messages[0].sequence

    result = await runner.summarize_context(summary_request(turn))
    assert result.summary == "the summary"
    system, human = model.calls[-1]
    assert isinstance(system, SystemMessage)
    assert system.content == CONTEXT_SUMMARY_INSTRUCTIONS
    assert isinstance(human, HumanMessage)
    assert "Where is order 1?" in str(human.content)

    last = turn.messages[-1].sequence
    summary = ContextSummary(generation=1, last_sequence=last, summary="the summary")
    session.start_turn("Hi")
    later = replace(session.context(), context_summary=summary)
    later = replace(later, messages=tuple(m for m in later.messages if m.sequence > last))
    await runner.run_model_step(later)
    lead = model.calls[-1][0]
    assert isinstance(lead, HumanMessage)
    assert str(lead.content).startswith(CONTEXT_SUMMARY_NOTE_HEADER)
