"""Pure rules of Stepwise compaction: token estimates, where a transcript may be cut,
and the summary request.

A cut falls only before a user message or a model response, and only where every
tool call before it has its result before it, so a call never loses its result and
a long turn can still be cut between its model responses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from dex_agents._texts import build_context_summary_omission_note
from dex_agents.models import (
    ModelOutputItem,
    ModelRequest,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
)
from dex_agents.runner import CutItem, context_summary_note, estimate_text_tokens
from dex_agents.runner import cut_points as shared_cut_points
from dex_agents.runner import select_cut as shared_select_cut
from dex_agents.values import ContextSummary

__all__ = [
    "cut_items",
    "cut_points",
    "estimate_item_tokens",
    "estimate_request_tokens",
    "select_cut",
    "summary_note",
    "trim_summary_items",
]


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
    return UserTextItem(context_summary_note(summary))


def cut_items(items: Sequence[TranscriptItem]) -> list[CutItem]:
    """The transcript as the shared cut rules see it."""
    cut: list[CutItem] = []
    for item in items:
        if isinstance(item, ModelOutputItem):
            opens = frozenset(call.call_id for call in item.tool_calls)
            cut.append(CutItem(estimate_item_tokens(item), opens=opens))
        elif isinstance(item, ToolResultItem):
            cut.append(CutItem(estimate_item_tokens(item), answers=frozenset({item.tool_call_id})))
        else:
            cut.append(CutItem(estimate_item_tokens(item)))
    return cut


def cut_points(items: Sequence[TranscriptItem]) -> list[int]:
    """Positions where the transcript may be cut; see ``dex_agents.compaction_support``."""
    return shared_cut_points(cut_items(items))


def select_cut(items: Sequence[TranscriptItem], retained_token_budget: int) -> int | None:
    return shared_select_cut(cut_items(items), retained_token_budget)


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
