"""Pure rules of Stepwise compaction: token estimates, where a transcript may be cut,
and the summary request.

A cut falls only before a user message or a model response, and only where every
tool call before it has its result before it, so a call never loses its result and
a long turn can still be cut between its model responses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from dex_agents.models.types import (
    ModelOutputItem,
    ModelRequest,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
)
from dex_agents.texts import (
    CONTEXT_SUMMARY_NOTE_HEADER,
    build_context_summary_omission_note,
)
from dex_agents.values import ContextSummary

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "cut_points",
    "estimate_item_tokens",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "select_cut",
    "summary_note",
    "trim_summary_items",
]

CHARACTERS_PER_TOKEN = 4
"""The estimate without a model's own counter: one token per four characters of JSON."""


def estimate_text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARACTERS_PER_TOKEN)


def _item_text(item: TranscriptItem) -> str:
    return json.dumps(item.to_json(), separators=(",", ":"))


def estimate_item_tokens(item: TranscriptItem) -> int:
    return estimate_text_tokens(_item_text(item))


def estimate_request_tokens(request: ModelRequest) -> int:
    """Instructions, transcript and tool definitions, as JSON text, at four characters a token."""
    tools = json.dumps(
        [[tool.name, tool.description, tool.parameters] for tool in request.tools],
        separators=(",", ":"),
    )
    return (
        estimate_text_tokens(request.instructions)
        + sum(estimate_item_tokens(item) for item in request.items)
        + estimate_text_tokens(tools)
    )


def summary_note(summary: ContextSummary) -> UserTextItem:
    """The user-role note that carries the summary at the start of model input."""
    return UserTextItem(f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.summary}")


def cut_points(items: Sequence[TranscriptItem]) -> list[int]:
    """Positions ``p`` (1..len) where ``items[:p]`` may be summarized and ``items[p:]`` kept."""
    points: list[int] = []
    open_calls: set[str] = set()
    for position, item in enumerate(items):
        if position > 0 and not open_calls and not isinstance(item, ToolResultItem):
            points.append(position)
        if isinstance(item, ModelOutputItem):
            open_calls.update(call.call_id for call in item.tool_calls)
        elif isinstance(item, ToolResultItem):
            open_calls.discard(item.tool_call_id)
    if items and not open_calls:
        points.append(len(items))
    return points


def select_cut(items: Sequence[TranscriptItem], retained_token_budget: int) -> int | None:
    """The cut whose kept items fit ``retained_token_budget`` with the most kept; when none
    fits (one turn alone is too large), the latest cut before the newest item."""
    points = [point for point in cut_points(items) if point < len(items)]
    if not points:
        return None
    suffix = [0] * (len(items) + 1)
    for position in range(len(items) - 1, -1, -1):
        suffix[position] = suffix[position + 1] + estimate_item_tokens(items[position])
    for point in points:
        if suffix[point] <= retained_token_budget:
            return point
    return points[-1]


def trim_summary_items(
    items: Sequence[TranscriptItem], *, fits: Callable[[list[TranscriptItem]], bool]
) -> tuple[list[TranscriptItem], int]:
    """Leave out the oldest items, up to a cut, until ``fits`` accepts the rest.

    Returns the items to summarize, starting with the omission note when any were
    left out, and how many were left out.
    """
    if fits(list(items)):
        return list(items), 0
    for point in cut_points(items):
        if point >= len(items):
            break
        kept: list[TranscriptItem] = [
            UserTextItem(build_context_summary_omission_note(point)),
            *items[point:],
        ]
        if fits(kept):
            return kept, point
    last = [point for point in cut_points(items) if point < len(items)]
    point = last[-1] if last else 0
    if point == 0:
        return list(items), 0
    return [UserTextItem(build_context_summary_omission_note(point)), *items[point:]], point
