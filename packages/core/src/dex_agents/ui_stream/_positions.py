"""Positions in the ``AgentEvents`` Stream, found by reading its retained messages.

A Dex resume token names the place *after* a message, so the position before a
turn's first event is the token of the message that precedes it, or ``""`` (the
retained head) when that event is the oldest one retained.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import dex

from dex_agents._values import AgentEvent
from dex_agents.session._flow import AgentSessionFlow

__all__ = ["EventPosition", "latest_position", "turn_start_position"]

_PAGE_SIZE = 100


@dataclass(frozen=True)
class EventPosition:
    """A Dex resume token, and whether the Stream still holds the turn's ``turn_started``."""

    token: str
    found: bool


async def latest_position(client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str) -> str:
    """The token after the newest retained event; ``""`` when none is retained."""
    page = await client.list_stream_messages(flow_id, flow.agent_events, 1)
    return page.messages[0].resume_token if page.messages else ""


async def _newest_first(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str
) -> AsyncIterator[dex.StreamMessage[AgentEvent]]:
    page_token = ""
    while True:
        page = await client.list_stream_messages(flow_id, flow.agent_events, _PAGE_SIZE, page_token)
        for message in page.messages:
            yield message
        if not page.next_page_token or not page.messages:
            return
        page_token = page.next_page_token


async def turn_start_position(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, turn_id: str
) -> EventPosition:
    """The position just before ``turn_id``'s first retained event.

    ``found`` says whether that event is the turn's ``turn_started``; when the
    Stream holds no event of the turn, the position is after the newest event.
    """
    newest: str | None = None
    seen_turn = False
    found_start = False
    async for message in _newest_first(client, flow, flow_id):
        if newest is None:
            newest = message.resume_token
        if found_start:
            return EventPosition(message.resume_token, True)
        event = message.value
        if event.turn_id == turn_id:
            seen_turn = True
            found_start = event.type == "turn_started"
        elif seen_turn:
            return EventPosition(message.resume_token, False)
    if not seen_turn:
        return EventPosition(newest or "", False)
    return EventPosition("", found_start)
