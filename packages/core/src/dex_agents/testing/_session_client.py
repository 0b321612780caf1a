"""``AgentSessionTestClient``: the public session client plus the waits tests need.

Every wait reads committed state (``get_agent_snapshot``), woken by the
session's events (the turn waits only by a turn's end, after its Step committed),
so a test never races a Step that has not committed. A
snapshot that fails because no Worker is up yet (for example right after a
SIGKILL) is retried until the wait's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from datetime import timedelta

from dex_agents._client import (
    DEFAULT_WAIT,
    TURN_END_EVENTS,
    AgentSessionClient,
    SessionWaitTimeoutError,
)
from dex_agents._values import (
    AgentEvent,
    AgentInterrupt,
    AgentSnapshot,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
)
from dex_agents.testing._polling import PollTimeoutError

__all__ = ["TURN_END_EVENTS", "AgentSessionTestClient"]


class AgentSessionTestClient(AgentSessionClient):
    """``AgentSessionClient`` with the waits a test expects next; timeouts raise
    ``PollTimeoutError``."""

    async def wait_for_snapshot(
        self,
        session_id: str,
        condition: Callable[[AgentSnapshot], bool],
        *,
        description: str = "the expected session state",
        within: timedelta = DEFAULT_WAIT,
        wake_on: Collection[str] | None = None,
    ) -> AgentSnapshot:
        try:
            return await super().wait_for_snapshot(
                session_id, condition, description=description, within=within, wake_on=wake_on
            )
        except SessionWaitTimeoutError as timeout:
            raise PollTimeoutError(str(timeout)) from None

    async def wait_for_user_message_wait(
        self, session_id: str, *, within: timedelta = DEFAULT_WAIT
    ) -> AgentSnapshot:
        """Until no turn is active and the session waits for the next user message."""
        return await self.wait_for_snapshot(
            session_id,
            lambda s: (
                s.state is not None
                and s.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
                and s.state.active_turn_id is None
            ),
            description="the session waits for a user message",
            within=within,
            wake_on=TURN_END_EVENTS,
        )

    async def wait_for_completed_turns(
        self, session_id: str, count: int, *, within: timedelta = DEFAULT_WAIT
    ) -> AgentSnapshot:
        """Until ``count`` turns have ended (completed or failed) and none is active."""
        return await self.wait_for_snapshot(
            session_id,
            lambda s: (
                s.state is not None
                and s.state.turn_count >= count
                and s.state.active_turn_id is None
                and s.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            ),
            description=f"{count} finished turns",
            within=within,
            wake_on=TURN_END_EVENTS,
        )

    async def wait_for_pending_interrupt(
        self,
        session_id: str,
        tool_name: str | None = None,
        *,
        within: timedelta = DEFAULT_WAIT,
    ) -> AgentInterrupt:
        """The first pending interrupt (of ``tool_name`` when given)."""
        return await self.wait_for_interrupt(session_id, tool_name, within=within)

    async def wait_for_pending_interrupts(
        self, session_id: str, count: int, *, within: timedelta = DEFAULT_WAIT
    ) -> tuple[AgentInterrupt, ...]:
        snapshot = await self.wait_for_snapshot(
            session_id,
            lambda s: len(s.pending_interrupts) >= count,
            description=f"{count} pending interrupts",
            within=within,
        )
        return snapshot.pending_interrupts

    async def wait_for_tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        status: AgentToolCallStatus,
        *,
        within: timedelta = DEFAULT_WAIT,
    ) -> AgentToolCall:
        """The record of ``tool_call_id`` once it has ``status``."""
        snapshot = await self.wait_for_snapshot(
            session_id,
            lambda s: any(
                c.tool_call_id == tool_call_id and c.status is status for c in s.tool_calls
            ),
            description=f"tool call {tool_call_id} {status.value}",
            within=within,
        )
        return next(c for c in snapshot.tool_calls if c.tool_call_id == tool_call_id)

    # --- events ----------------------------------------------------------------------

    async def read_events(
        self,
        session_id: str,
        *,
        until: Callable[[list[AgentEvent]], bool],
        description: str = "the expected events",
        within: timedelta = DEFAULT_WAIT,
    ) -> list[AgentEvent]:
        """Read ``AgentEvents`` from the retained head until ``until(events)`` holds."""
        events: list[AgentEvent] = []
        if until(events):
            return events
        try:
            async with asyncio.timeout(within.total_seconds()):
                async with contextlib.aclosing(self.events(session_id)) as stream:
                    async for item in stream:
                        events.append(item.event)
                        if until(events):
                            return events
        except TimeoutError:
            pass
        types = [event.type for event in events]
        raise TimeoutError(f"{session_id}: no {description} in events {types}")

    async def read_events_through_turn(
        self, session_id: str, turn_id: str, *, within: timedelta = DEFAULT_WAIT
    ) -> list[AgentEvent]:
        """Events up to and including the end (completed or failed) of ``turn_id``."""
        return await self.read_events(
            session_id,
            until=lambda events: any(
                e.turn_id == turn_id and e.type in TURN_END_EVENTS for e in events
            ),
            description=f"end of {turn_id}",
            within=within,
        )
