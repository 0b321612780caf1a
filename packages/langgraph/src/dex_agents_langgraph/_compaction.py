"""Compaction of a LangGraph session: token counts, where to cut, and the summary request.

Tokens are LangChain's ``count_tokens_approximately`` of the messages' text. A cut
falls only where every tool call of an ``AIMessage`` before it has its
``ToolMessage`` before it, so a long turn can be cut between its model responses.
``LangGraphRunner.summarize_context`` sends ``summary_request_messages`` to its
``summary_model``.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    ContextSummaryRequest,
    CutItem,
    context_summary_note,
    select_cut,
    summarized_through,
    summary_input_text,
)
from dex_agents_langgraph._messages import stored_messages

__all__ = ["compaction_cutoff", "estimate_stored_tokens", "summary_request_messages"]


def estimate_stored_tokens(turn: AgentTurnContext) -> int:
    """``count_tokens_approximately`` over the stored messages, the summary note first."""
    messages: list[BaseMessage] = list(stored_messages(turn.messages))
    if turn.context_summary is not None:
        messages.insert(0, HumanMessage(content=context_summary_note(turn.context_summary)))
    return count_tokens_approximately(messages)


def compaction_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """The last sequence to summarize: the cut that keeps the most messages within the
    budget, where every tool call before it has its result."""
    items: list[CutItem] = []
    for message in stored_messages(turn.messages):
        tokens = count_tokens_approximately([message])
        if isinstance(message, ToolMessage):
            items.append(CutItem(tokens, answers=frozenset({message.tool_call_id})))
        elif isinstance(message, AIMessage):
            opens = frozenset(str(call["id"]) for call in message.tool_calls if call["id"])
            items.append(CutItem(tokens, opens=opens))
        else:
            items.append(CutItem(tokens))
    point = select_cut(items, retained_token_budget)
    return summarized_through(turn.messages, point) if point is not None else None


def summary_request_messages(request: ContextSummaryRequest) -> list[BaseMessage]:
    """``CONTEXT_SUMMARY_INSTRUCTIONS`` as a system message, then the earlier summary and
    messages as one human message, within the request's input token budget."""
    text, _ = summary_input_text(
        request.messages,
        request.previous_summary,
        token_budget=request.input_token_budget,
        count_tokens=lambda value: count_tokens_approximately([HumanMessage(content=value)]),
    )
    return [SystemMessage(content=CONTEXT_SUMMARY_INSTRUCTIONS), HumanMessage(content=text)]
