"""Pure rules of the read RPCs: the snapshot and message paging."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentPlan,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ContextSummary,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    QueuedUserMessage,
)
from dex_agents.session._options import DEFAULT_MAX_USER_MESSAGE_BYTES

__all__ = [
    "DEFAULT_MESSAGE_PAGE_LIMIT",
    "MAX_MESSAGE_PAGE_LIMIT",
    "STORED_TEXT_RATIO",
    "accepts_user_message",
    "build_snapshot",
    "page_messages",
    "text_fits",
]

DEFAULT_MESSAGE_PAGE_LIMIT = 50
MAX_MESSAGE_PAGE_LIMIT = 200


def accepts_user_message(
    message: AgentUserMessage,
    *,
    plan_mode_enabled: bool = False,
    max_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES,
) -> bool:
    """Accept a message unless it is blank (``str.strip()``), stores in more than
    ``max_bytes`` (see ``text_fits``), or asks for plan mode when off."""
    if not message.text.strip() or not text_fits(message.text, max_bytes):
        return False
    return not (message.plan_mode and not plan_mode_enabled)


STORED_TEXT_RATIO = 1.5
"""How much larger than ``max_bytes`` a text may be as the JSON string the session stores."""


def text_fits(text: str, max_bytes: int) -> bool:
    """Whether ``text`` is at most ``max_bytes`` of UTF-8, and stores (as the JSON string
    the Dex codec writes: ASCII one byte a character, others escaped to six or twelve)
    in at most ``1.5 * max_bytes``, so a message's two stored copies fit one value."""
    if len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        return False
    if len(text) * 12 <= max_bytes * STORED_TEXT_RATIO:
        return True  # no character escapes to more than twelve bytes
    return len(json.dumps(text)) - 2 <= max_bytes * STORED_TEXT_RATIO


def build_snapshot(
    *,
    state: AgentState | None,
    messages: Sequence[AgentMessage],
    pending_interrupts: Sequence[AgentInterrupt],
    records: Sequence[AgentToolCall],
    usage: AgentUsage | None,
    queued_messages: Sequence[QueuedUserMessage],
    context_summary: ContextSummary | None = None,
    session_settings: Mapping[str, Any] | None = None,
    plan: AgentPlan | None = None,
    steered_messages: Sequence[QueuedUserMessage] = (),
) -> AgentSnapshot:
    """One committed view of the session: messages by sequence, calls by deferral order."""
    return AgentSnapshot(
        state=state,
        messages=tuple(sorted(messages, key=lambda message: message.sequence)),
        pending_interrupts=tuple(pending_interrupts),
        tool_calls=tuple(sorted(records, key=lambda record: record.deferral_order)),
        usage=usage if usage is not None else AgentUsage(),
        queued_message_count=len(queued_messages),
        queued_messages=tuple(queued_messages),
        context_summary=context_summary,
        session_settings=session_settings if session_settings is not None else {},
        plan=plan,
        steered_messages=tuple(steered_messages),
    )


def page_messages(
    messages: Sequence[AgentMessage],
    request: ListAgentMessagesInput,
    *,
    deleted_before_sequence: int | None = None,
) -> ListAgentMessagesOutput:
    """The ``limit`` messages before ``before_sequence``, oldest first.

    ``limit`` is clamped to 1..200 and defaults to 50; ``next_before_sequence`` is
    the first sequence of the page while older messages exist, else null.
    ``deleted_before_sequence`` is the oldest stored sequence once retention deleted
    earlier messages; every page carries it.
    """
    limit = DEFAULT_MESSAGE_PAGE_LIMIT if request.limit is None else request.limit
    limit = min(MAX_MESSAGE_PAGE_LIMIT, max(1, limit))
    ordered = sorted(messages, key=lambda message: message.sequence)
    before = request.before_sequence
    eligible = ordered if before is None else [m for m in ordered if m.sequence < before]
    page = eligible[-limit:]
    has_older = len(eligible) > len(page)
    return ListAgentMessagesOutput(
        messages=tuple(page),
        next_before_sequence=page[0].sequence if page and has_older else None,
        deleted_before_sequence=deleted_before_sequence,
    )
