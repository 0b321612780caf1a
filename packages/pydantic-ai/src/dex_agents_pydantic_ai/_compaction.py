"""Compaction of a Pydantic AI session: where to cut, and the summary's input.

Pydantic AI counts no tokens before a request, so the runner estimates one token
per four characters of the stored messages' JSON and the summary
(``dex_agents.compaction_support.estimate_stored_tokens``). A cut falls only where
every tool call of a model response before it has its return before it.
``PydanticAIRunner.summarize_context`` runs a tool-less agent on the same model with
``summary_prompt`` as its user prompt.
"""

from __future__ import annotations

from pydantic_ai.messages import ModelResponse, ToolReturnPart

from dex_agents.runner import (
    AgentTurnContext,
    ContextSummaryRequest,
    CutItem,
    estimate_text_tokens,
    select_cut,
    summary_input_text,
)
from dex_agents_pydantic_ai._messages import decode_history

__all__ = ["compaction_cutoff", "summary_prompt"]


def compaction_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """The last sequence to summarize: the cut that keeps the most messages within the
    budget, where every tool call before it has its return stored."""
    items: list[CutItem] = []
    for message in turn.messages:
        opens: set[str] = set()
        answers: set[str] = set()
        for decoded in decode_history([message]):
            if isinstance(decoded, ModelResponse):
                opens.update(call.tool_call_id for call in decoded.tool_calls)
            else:
                answers.update(
                    part.tool_call_id
                    for part in decoded.parts
                    if isinstance(part, ToolReturnPart) and part.tool_call_id
                )
        items.append(
            CutItem(
                estimate_text_tokens(message.framework_item),
                opens=frozenset(opens),
                answers=frozenset(answers),
            )
        )
    point = select_cut(items, retained_token_budget)
    return turn.messages[point - 1].sequence if point is not None else None


def summary_prompt(request: ContextSummaryRequest) -> str:
    """The summary run's user prompt: the earlier summary and the messages, within the
    request's input token budget."""
    text, _ = summary_input_text(
        request.messages, request.previous_summary, token_budget=request.input_token_budget
    )
    return text
