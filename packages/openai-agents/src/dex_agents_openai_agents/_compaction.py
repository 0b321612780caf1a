"""Compaction of an OpenAI Agents SDK session: where to cut, and the summary run.

The Agents SDK counts no tokens before a request, so the runner estimates one token
per four characters of the stored items' JSON and the summary
(``dex_agents.compaction_support.estimate_stored_tokens``). A cut falls only where
every ``function_call`` before it has its ``function_call_output`` before it, and
only at a turn's first model call: later calls continue from the SDK's ``RunState``,
which carries the turn's whole input. ``summarize_context`` runs a tool-less copy of
the agent (``summarizer_of``) once over ``summary_input``.
"""

from __future__ import annotations

from typing import Any

from agents import Agent

from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    ContextSummaryRequest,
    CutItem,
    estimate_text_tokens,
    select_cut,
    summary_input_text,
)
from dex_agents_openai_agents._messages import stored_item

__all__ = ["compaction_cutoff", "summarizer_of", "summary_input"]


def compaction_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """The last sequence to summarize: the cut that keeps the most messages within the
    budget, where every ``function_call`` before it has its output."""
    items: list[CutItem] = []
    for message in turn.messages:
        item = stored_item(message)
        call_id = str(item.get("call_id", ""))
        kind = item.get("type")
        tokens = estimate_text_tokens(message.framework_item)
        if kind == "function_call" and call_id:
            items.append(CutItem(tokens, opens=frozenset({call_id})))
        elif kind == "function_call_output" and call_id:
            items.append(CutItem(tokens, answers=frozenset({call_id})))
        else:
            items.append(CutItem(tokens))
    point = select_cut(items, retained_token_budget)
    return turn.messages[point - 1].sequence if point is not None else None


def summarizer_of(agent: Agent[Any]) -> Agent[Any]:
    """An agent without tools on ``agent``'s model and settings, with
    ``CONTEXT_SUMMARY_INSTRUCTIONS``."""
    return Agent[Any](
        name=f"{agent.name} summarizer",
        instructions=CONTEXT_SUMMARY_INSTRUCTIONS,
        model=agent.model,
        model_settings=agent.model_settings,
    )


def summary_input(request: ContextSummaryRequest) -> str:
    """The summary run's input: the earlier summary and the messages, within the
    request's input token budget."""
    text, _ = summary_input_text(
        request.messages, request.previous_summary, token_budget=request.input_token_budget
    )
    return text
