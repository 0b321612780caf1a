"""Pure rules of the Stepwise transcript: stored messages in, model input out.

The session stores the transcript as messages whose ``framework_item`` is a
``TranscriptItem``. These functions decode it, find the tool results the next
model call must carry, and pair every tool call with a result so an orphaned
call never reaches a provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import cast

from dex_agents.models import (
    ModelOutputItem,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
    transcript_item_from_json,
    transcript_item_to_text,
)
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    DecodeCache,
    ToolCallDisplay,
    is_display_only,
    response_messages,
)
from dex_agents.values import AgentMessage, FrameworkMessage

__all__ = [
    "DECODED_TRANSCRIPT_ITEMS",
    "RUN_STATE_KEY",
    "decode_run_state",
    "decode_transcript",
    "encode_run_state",
    "model_output_messages",
    "pair_tool_calls_with_results",
    "tool_result_message",
    "unanswered_tool_calls",
    "user_text_message",
]

RUN_STATE_KEY = "model_calls"


def encode_run_state(model_calls: int) -> str:
    """``FrameworkRunState``: the turn's model call count, the only state between calls."""
    return json.dumps({RUN_STATE_KEY: model_calls}, separators=(",", ":"))


def decode_run_state(state: str | None) -> int:
    """The model calls the turn has made so far (0 for its first call)."""
    if state is None:
        return 0
    try:
        value: object = json.loads(state)
    except ValueError as error:
        raise ValueError(f"unreadable Stepwise run state {state!r}") from error
    if isinstance(value, dict):
        count = cast("dict[str, object]", value).get(RUN_STATE_KEY)
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            return count
    raise ValueError(f"unreadable Stepwise run state {state!r}")


DECODED_TRANSCRIPT_ITEMS: DecodeCache[TranscriptItem] = DecodeCache()
"""Decoded transcript items of this process by their stored text. Every model Step reads
the whole transcript again and a stored item never changes; the items are frozen
dataclasses, so they are shared, not copied."""


def _decode_item(framework_item: str) -> TranscriptItem:
    return transcript_item_from_json(json.loads(framework_item))


def decode_transcript(messages: Sequence[AgentMessage]) -> list[TranscriptItem]:
    """Every stored message's ``framework_item``, decoded; a foreign item raises ``ValueError``.

    Each item is decoded once per process (``DECODED_TRANSCRIPT_ITEMS``); callers must
    not change what a ``ModelOutputItem.item`` holds.
    """
    items: list[TranscriptItem] = []
    for message in messages:
        if is_display_only(message.framework_item):
            continue
        try:
            item = DECODED_TRANSCRIPT_ITEMS.get_or_decode(message.framework_item, _decode_item)
        except ValueError as error:
            raise ValueError(
                f"message {message.sequence} is not a Stepwise message ({error}); a Stepwise "
                "agent reads only sessions it wrote"
            ) from error
        items.append(item)
    return items


def unanswered_tool_calls(items: Sequence[TranscriptItem]) -> list[tuple[str, str]]:
    """``(tool_call_id, tool_name)`` of calls after the last user text that have no result.

    These are the calls of the turn's earlier responses whose results the next
    model call must carry (and the runner stores now).
    """
    start = 0
    for index, item in enumerate(items):
        if isinstance(item, UserTextItem):
            start = index
    answered = {item.tool_call_id for item in items[start:] if isinstance(item, ToolResultItem)}
    pending: list[tuple[str, str]] = []
    for item in items[start:]:
        if isinstance(item, ModelOutputItem):
            pending.extend(
                (call.call_id, call.name)
                for call in item.tool_calls
                if call.call_id not in answered
            )
    return pending


def pair_tool_calls_with_results(
    items: Sequence[TranscriptItem],
    missing_result: Callable[[str, str], str] = lambda _id, _name: OUTCOME_UNKNOWN_TOOL_RESULT,
) -> list[TranscriptItem]:
    """Model input in which every tool call is followed by exactly its results.

    After each model output, its calls' results come next, in call order; a call
    without a stored result gets ``missing_result`` (the outcome-unknown text by
    default), and a result that answers no call of the output before it is left out,
    because providers refuse both.
    """
    paired: list[TranscriptItem] = []
    index = 0
    while index < len(items):
        item = items[index]
        index += 1
        if isinstance(item, ToolResultItem):
            continue  # a stray result; results are consumed with their model output below
        paired.append(item)
        if not isinstance(item, ModelOutputItem) or not item.tool_calls:
            continue
        results: dict[str, ToolResultItem] = {}
        while index < len(items) and isinstance(items[index], ToolResultItem):
            result = items[index]
            assert isinstance(result, ToolResultItem)
            results.setdefault(result.tool_call_id, result)
            index += 1
        for call in item.tool_calls:
            found = results.get(call.call_id)
            paired.append(
                found
                if found is not None
                else ToolResultItem(
                    call.call_id, call.name, missing_result(call.call_id, call.name)
                )
            )
    return paired


def user_text_message(text: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="user", framework_item=transcript_item_to_text(UserTextItem(text)), text=text
    )


def model_output_messages(output: ModelOutputItem) -> list[FrameworkMessage]:
    """The stored assistant messages of one model response: one per tool call.

    Display fields as every runner fills them (``response_messages``).
    """
    return response_messages(
        transcript_item_to_text(output),
        text=output.text or None,
        tool_calls=[
            ToolCallDisplay(call.call_id, call.name, call.arguments) for call in output.tool_calls
        ],
    )


def tool_result_message(result: ToolResultItem) -> FrameworkMessage:
    return FrameworkMessage(
        role="tool",
        framework_item=transcript_item_to_text(result),
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        tool_output=result.output,
    )
