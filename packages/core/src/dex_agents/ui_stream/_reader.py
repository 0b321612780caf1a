"""Reading ``AgentEvents`` from a Dex position, with the first read done before a response.

A route must know whether Dex accepts a resume token before it answers 200, so
``EventReader.open`` reads once and keeps what it read for the iteration.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import dex

from dex_agents._values import AgentEvent
from dex_agents.session._flow import AgentSessionFlow

__all__ = ["CHECK_WAIT", "IDLE_WAIT", "EventReader", "ResumeTokenRejectedError"]

IDLE_WAIT = timedelta(seconds=1)
"""Server-side long-poll of one read; an idle read lets the caller check committed state."""
CHECK_WAIT = timedelta(seconds=0.25)


class ResumeTokenRejectedError(ValueError):
    """Dex rejected the resume token (forged, damaged, or of another session)."""

    __module__ = "dex_agents.ui_stream"  # the public import path, as tracebacks show it


class EventReader:
    """Sequential reads of one session's ``AgentEvents`` from a resume token."""

    def __init__(
        self, client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, token: str
    ) -> None:
        self._client = client
        self._flow = flow
        self._flow_id = flow_id
        self.token = token
        """The position after the last message handed out."""
        self._pending: asyncio.Task[dex.StreamMessage[AgentEvent]] | None = None

    @classmethod
    async def open(
        cls, client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, token: str
    ) -> EventReader:
        """Start the first read, so a token Dex rejects raises ``ResumeTokenRejectedError`` now.

        Dex long-polls in whole seconds, so the first read keeps running in the
        background once it outlives ``CHECK_WAIT``: Dex rejects a bad token at once.
        """
        reader = cls(client, flow, flow_id, token)
        task = asyncio.create_task(reader._read(IDLE_WAIT))
        task.add_done_callback(_retrieve)
        reader._pending = task
        await asyncio.wait({task}, timeout=CHECK_WAIT.total_seconds())
        if task.done():
            try:
                task.result()
            except dex.LongPollTimeoutError:
                pass
            except dex.DexServiceError as error:
                reader._pending = None
                if error.sub_status is dex.ErrorSubStatus.FLOW_NOT_EXISTS:
                    raise
                raise ResumeTokenRejectedError(
                    f"Dex rejected the resume token of {flow_id}: {error.detail}"
                ) from error
        return reader

    async def _read(self, wait: timedelta) -> dex.StreamMessage[AgentEvent]:
        return await self._client.read_stream(
            self._flow_id, self._flow.agent_events, self.token, timeout=wait
        )

    async def next(self) -> dex.StreamMessage[AgentEvent] | None:
        """The next message, or ``None`` when none arrived within ``IDLE_WAIT``."""
        pending, self._pending = self._pending, None
        try:
            message = await (pending if pending is not None else self._read(IDLE_WAIT))
        except dex.LongPollTimeoutError:
            return None
        self.token = message.resume_token
        return message


def _retrieve(task: asyncio.Task[dex.StreamMessage[AgentEvent]]) -> None:
    """Mark a background read's error as seen when nobody awaits it any more."""
    if not task.cancelled():
        task.exception()
