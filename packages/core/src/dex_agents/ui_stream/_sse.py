"""Plain Server-Sent Events of a session's ``AgentEvents``: each event's ``id`` is its Dex
resume token, so an ``EventSource`` resumes through ``Last-Event-ID``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import dex

from dex_agents._values import to_wire
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.ui_stream._json import dumps
from dex_agents.ui_stream._reader import EventReader

__all__ = ["KEEPALIVE", "agent_event_sse_frame", "open_agent_event_sse_stream"]

KEEPALIVE = ": keepalive\n\n"
"""Written while no event arrives, so a closed connection is noticed."""


def agent_event_sse_frame(resume_token: str, data: object) -> str:
    """One SSE event: ``id`` the resume token, ``data`` the event's wire JSON."""
    return f"id: {resume_token}\ndata: {dumps(data)}\n\n"


async def open_agent_event_sse_stream(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, resume_token: str = ""
) -> AsyncIterator[str]:
    """SSE text from the event after ``resume_token`` (``""``: the oldest retained event).

    Reads once before returning, so a token Dex rejects raises
    ``ResumeTokenRejectedError`` before any response starts (a 400 for the browser).
    """
    reader = await EventReader.open(client, flow, flow_id, resume_token)
    return _frames(reader)


async def _frames(reader: EventReader) -> AsyncIterator[str]:
    yield "retry: 1000\n\n"
    while True:
        message = await reader.next()
        if message is None:
            yield KEEPALIVE
            continue
        yield agent_event_sse_frame(message.resume_token, to_wire(message.value))
