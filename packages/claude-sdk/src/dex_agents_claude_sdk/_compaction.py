"""Compaction of a Claude session: token counts, where to cut, and the summary's input.

``ClaudeRunner.estimate_input_tokens`` asks the Messages API's ``count_tokens`` for
the request a model step would send (``counted_request``) and falls back on one token
per four characters of its JSON. A cut falls only where every ``tool_use`` before it
has its ``tool_result`` before it. ``summarize_context`` sends the earlier summary and
messages as one user message (``summary_text``), within the window less ``max_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dex_agents.runner import (
    AgentTurnContext,
    ContextSummaryRequest,
    CutItem,
    estimate_text_tokens,
    is_display_only,
    select_cut,
    summary_input_text,
)
from dex_agents_claude_sdk._messages import decode_item, tool_uses_of

__all__ = [
    "COUNTED_REQUEST_KEYS",
    "compaction_cutoff",
    "counted_request",
    "estimate_request_tokens",
    "summary_text",
]

COUNTED_REQUEST_KEYS = ("model", "messages", "system", "tools", "thinking")
"""The keys of a ``messages.stream`` request that ``count_tokens`` takes."""


def counted_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model step's request that ``count_tokens`` counts."""
    return {key: request[key] for key in COUNTED_REQUEST_KEYS if key in request}


def estimate_request_tokens(counted: Mapping[str, Any]) -> int:
    """One token per four characters of the request's JSON."""
    return estimate_text_tokens(json.dumps(counted, default=str))


def compaction_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """The last sequence to summarize: the cut that keeps the most messages within the
    budget, where every ``tool_use`` before it has its result."""
    items: list[CutItem] = []
    for message in turn.messages:
        tokens = estimate_text_tokens(message.framework_item)
        if message.role == "tool" and message.tool_call_id:
            items.append(CutItem(tokens, answers=frozenset({message.tool_call_id})))
        elif is_display_only(message.framework_item):
            items.append(CutItem(tokens))  # shows a call the message before holds
        else:
            uses = tool_uses_of(decode_item(message.framework_item))
            items.append(CutItem(tokens, opens=frozenset(use.call_id for use in uses)))
    point = select_cut(items, retained_token_budget)
    return turn.messages[point - 1].sequence if point is not None else None


def summary_text(request: ContextSummaryRequest, max_tokens: int) -> str:
    """The summary call's one user message: the earlier summary and the messages, the
    oldest left out (with a note) when they would not fit the budget less ``max_tokens``."""
    text, _ = summary_input_text(
        request.messages,
        request.previous_summary,
        token_budget=max(1, request.input_token_budget - max_tokens),
    )
    return text
