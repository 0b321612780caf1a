"""Reading ``AgentEvents`` from a Dex position, with the first read done before a response.

A route must know whether Dex accepts a resume token before it answers 200, so
``EventReader.open`` reads once and keeps what it read for the iteration.
"""

from __future__ import annotations

from datetime import timedelta

import dex

from dex_agents.session import AgentSessionFlow
from dex_agents.values import AgentEvent

__all__ = ["IDLE_WAIT", "EventReader", "ResumeTokenRejectedError"]

IDLE_WAIT = timedelta(seconds=1)
"""Server-side long-poll of one read; an idle read lets the caller check committed state."""


class ResumeTokenRejectedError(ValueError):
    """Dex rejected the resume token (forged, damaged, or of another session)."""


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
        self._held: dex.StreamMessage[AgentEvent] | None = None
        self._checked = False

    @classmethod
    async def open(
        cls, client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, token: str
    ) -> EventReader:
        """Read once so a token Dex rejects raises ``ResumeTokenRejectedError`` now."""
        reader = cls(client, flow, flow_id, token)
        await reader._check()
        return reader

    async def _check(self) -> None:
        self._checked = True
        try:
            self._held = await self._read(timedelta(0))
        except dex.LongPollTimeoutError:
            return
        except dex.DexServiceError as error:
            if error.sub_status is dex.ErrorSubStatus.FLOW_NOT_EXISTS:
                raise
            raise ResumeTokenRejectedError(
                f"Dex rejected the resume token of {self._flow_id}: {error.detail}"
            ) from error

    async def _read(self, wait: timedelta) -> dex.StreamMessage[AgentEvent]:
        return await self._client.read_stream(
            self._flow_id, self._flow.agent_events, self.token, timeout=wait
        )

    async def next(self, wait: timedelta = IDLE_WAIT) -> dex.StreamMessage[AgentEvent] | None:
        """The next message, or ``None`` when none arrived within ``wait``."""
        if not self._checked:
            await self._check()
        if self._held is not None:
            message, self._held = self._held, None
        else:
            try:
                message = await self._read(wait)
            except dex.LongPollTimeoutError:
                return None
        self.token = message.resume_token
        return message
