"""Building blocks of the compaction methods for framework adapters.

An adapter implements ``estimate_input_tokens``, ``select_compaction_cutoff`` and
``summarize_context`` (see ``dex_agents.runner.SupportsCompaction``). The parts every framework
shares live here, as pure functions:

* ``estimate_text_tokens``: the documented estimate for a framework without a token
  counter of its own, one token per four characters;
* ``select_cut``: the cut that keeps the most messages within the retained budget,
  placed only where every earlier tool call has its result, so a call is never
  separated from its result and a long turn can still be cut between its model
  responses;
* ``summary_input_text``: the one user message a summary call sends, rendered from
  the messages' display fields, with the earlier summary first and the oldest
  messages left out (and an omission note) when it would not fit the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dex_agents._adapter_support import is_display_only
from dex_agents._texts import CONTEXT_SUMMARY_NOTE_HEADER, build_context_summary_omission_note
from dex_agents._values import AgentMessage, ContextSummary

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "CutItem",
    "context_summary_note",
    "cut_points",
    "estimate_stored_tokens",
    "estimate_text_tokens",
    "select_cut",
    "summarized_through",
    "summary_input_text",
]

CHARACTERS_PER_TOKEN = 4
"""The estimate without a model's own counter: one token per four characters."""


def estimate_text_tokens(text: str) -> int:
    """About how many tokens ``text`` is: its characters over ``CHARACTERS_PER_TOKEN``."""
    return math.ceil(len(text) / CHARACTERS_PER_TOKEN)


def context_summary_note(summary: ContextSummary) -> str:
    """The user-role note that carries the summary at the start of model input."""
    return f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.summary}"


def estimate_stored_tokens(messages: Sequence[AgentMessage], summary: ContextSummary | None) -> int:
    """The documented estimate of a model input: the stored messages' framework JSON and
    the summary note, one token per four characters."""
    texts = [message.framework_item for message in messages]
    if summary is not None:
        texts.append(context_summary_note(summary))
    return sum(estimate_text_tokens(text) for text in texts)


@dataclass(frozen=True)
class CutItem:
    """One message as the cut rules see it: its tokens and the tool calls it opens and
    answers (by call ID)."""

    tokens: int
    opens: frozenset[str] = field(default_factory=frozenset[str])
    answers: frozenset[str] = field(default_factory=frozenset[str])


def cut_points(items: Sequence[CutItem]) -> list[int]:
    """Positions ``p`` (1..len) where ``items[:p]`` may be summarized and ``items[p:]`` kept:
    no tool call before ``p`` is waiting for its result, and ``items[p]`` answers none."""
    points: list[int] = []
    open_calls: set[str] = set()
    for position, item in enumerate(items):
        if position > 0 and not open_calls and not item.answers:
            points.append(position)
        open_calls.update(item.opens)
        open_calls.difference_update(item.answers)
    if items and not open_calls:
        points.append(len(items))
    return points


def select_cut(items: Sequence[CutItem], retained_token_budget: int) -> int | None:
    """The cut whose kept items fit ``retained_token_budget`` with the most kept; when none
    fits (one turn alone is too large), the latest cut before the newest item."""
    points = [point for point in cut_points(items) if point < len(items)]
    if not points:
        return None
    suffix = [0] * (len(items) + 1)
    for position in range(len(items) - 1, -1, -1):
        suffix[position] = suffix[position + 1] + items[position].tokens
    for point in points:
        if suffix[point] <= retained_token_budget:
            return point
    return points[-1]


def _message_line(message: AgentMessage) -> str:
    if message.role == "tool":
        return f"tool result of {message.tool_name or 'a tool'}: {message.tool_output or ''}"
    parts = [message.text] if message.text else []
    if message.tool_name:
        parts.append(f"[calls {message.tool_name} {message.tool_arguments or ''}]".strip())
    return f"{message.role}: {' '.join(parts)}"


def summary_input_text(
    messages: Sequence[AgentMessage],
    previous: ContextSummary | None,
    *,
    token_budget: int,
    count_tokens: Callable[[str], int] = estimate_text_tokens,
) -> tuple[str, int]:
    """The text a summary call sends as its one user message, and how many of the oldest
    messages were left out to keep it within ``token_budget``."""
    lead = [context_summary_note(previous)] if previous is not None else []
    lines = [_message_line(message) for message in messages]
    omitted = 0
    while True:
        note = [build_context_summary_omission_note(omitted)] if omitted else []
        text = "\n\n".join([*lead, *note, *lines[omitted:]])
        if count_tokens(text) <= token_budget or omitted >= len(lines) - 1:
            return text, omitted
        omitted += 1


def summarized_through(messages: Sequence[AgentMessage], point: int) -> int:
    """The last sequence to summarize for a cut after ``point`` replayed items.

    A runner counts its cut over the messages replay reads, which skips the display-only
    messages of a response with several tool calls; the summary then also takes the
    display-only messages that follow its last item, since they show that item's calls.
    """
    kept = 0
    for index, message in enumerate(messages):
        if is_display_only(message.framework_item):
            continue
        if kept == point:
            return messages[index - 1].sequence
        kept += 1
    return messages[-1].sequence
