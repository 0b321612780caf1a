"""``AgentSessionTestClient``: typed session RPCs and waits on committed session state.

Every wait reads ``get_agent_snapshot`` (committed state only) until a condition
holds, so a test never races a Step that has not committed. A snapshot that
fails because no Worker is up yet (for example right after a SIGKILL) is
retried until the wait's deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import dex

from dex_agents.session import AgentSessionFlow
from dex_agents.testing.polling import PollTimeoutError, poll_until
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUserMessage,
    AnswerQuestionInput,
    CancelTurnInput,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    ResolveInterruptInput,
    SteerUserMessageInput,
)

DEFAULT_WAIT = timedelta(seconds=60)
LOCK_CONFLICT_RETRIES = 20
_LOCK_CONFLICT_BACKOFF_SECONDS = 0.05
_EVENT_READ_WAIT = timedelta(seconds=1)


class AgentSessionTestClient:
    """Session RPCs on one session Flow, with waits for what a test expects next."""

    def __init__(self, client: dex.AsyncClient, flow: AgentSessionFlow) -> None:
        self.client = client
        self.flow = flow

    # --- RPCs ----------------------------------------------------------------------

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        *,
        config: dex.FlowConfig | None = None,
    ) -> str:
        """Start session ``session_id``; ``config`` overrides the Flow's config (for example
        ``FlowConfig(step_durability=StepDurability.ASYNC)``). Returns the run ID."""
        return await self.client.start_flow(
            self.flow,
            session_id,
            AgentSessionStartInput(initial_message=initial_message),
            dex.StartFlowOptions(config_override=config),
        )

    async def send_user_message(
        self, session_id: str, text: str, *, plan_mode: bool = False
    ) -> bool:
        return await self.client.invoke_rpc(
            self.flow.send_user_message,
            session_id,
            AgentUserMessage(text=text, plan_mode=plan_mode),
        )

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject; retries ``RpcLockConflictError``, which the contract says is safe."""
        request = ResolveInterruptInput(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return await self._retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.resolve_interrupt, session_id, request)
        )

    async def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question; retries lock conflicts like ``resolve_interrupt``."""
        request = AnswerQuestionInput(interrupt_id=interrupt_id, answer=answer)
        return await self._retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.answer_question, session_id, request)
        )

    async def steer_user_message(
        self, session_id: str, *, text: str | None = None, message_id: str | None = None
    ) -> bool:
        """Steer the active turn with ``text`` or a queued message; queues text between turns."""
        request = SteerUserMessageInput(message_id=message_id, text=text)
        return await self.client.invoke_rpc(self.flow.steer_user_message, session_id, request)

    async def delete_queued_message(self, session_id: str, message_id: str) -> bool:
        request = DeleteQueuedMessageInput(message_id=message_id)
        return await self.client.invoke_rpc(self.flow.delete_queued_message, session_id, request)

    async def cancel_turn(self, session_id: str, turn_id: str | None = None) -> bool:
        """Stop the active turn; retries lock conflicts, which the contract says are safe."""
        request = CancelTurnInput(turn_id=turn_id)
        return await self._retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.cancel_turn, session_id, request)
        )

    async def execute_plan(self, session_id: str, revision: int) -> bool:
        """Approve plan ``revision``; retries lock conflicts like ``cancel_turn``."""
        request = ExecutePlanInput(revision=revision)
        return await self._retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.execute_plan, session_id, request)
        )

    @staticmethod
    async def _retrying_lock_conflicts(call: Callable[[], Awaitable[bool]]) -> bool:
        for attempt in range(LOCK_CONFLICT_RETRIES):
            try:
                return await call()
            except dex.RpcLockConflictError:
                if attempt == LOCK_CONFLICT_RETRIES - 1:
                    raise
                await asyncio.sleep(_LOCK_CONFLICT_BACKOFF_SECONDS * (attempt + 1))
        raise AssertionError("unreachable")

    async def snapshot(self, session_id: str) -> AgentSnapshot:
        return await self.client.invoke_rpc(self.flow.get_agent_snapshot, session_id)

    async def list_messages(
        self, session_id: str, *, before_sequence: int | None = None, limit: int | None = None
    ) -> ListAgentMessagesOutput:
        return await self.client.invoke_rpc(
            self.flow.list_agent_messages,
            session_id,
            ListAgentMessagesInput(before_sequence=before_sequence, limit=limit),
        )

    # --- waits on committed state ----------------------------------------------------

    async def wait_for_snapshot(
        self,
        session_id: str,
        condition: Callable[[AgentSnapshot], bool],
        *,
        description: str,
        within: timedelta = DEFAULT_WAIT,
    ) -> AgentSnapshot:
        """The first snapshot for which ``condition`` holds."""

        last_seen: list[object] = [None]

        async def probe() -> AgentSnapshot | None:
            try:
                snapshot = await self.snapshot(session_id)
            except dex.DexServiceError as error:
                last_seen[0] = error  # no Worker yet, or the session is still starting
                return None
            last_seen[0] = snapshot
            return snapshot if condition(snapshot) else None

        try:
            return await poll_until(
                probe, description=f"{session_id}: {description}", within=within
            )
        except PollTimeoutError as timeout:
            raise PollTimeoutError(f"{timeout}; last snapshot or error: {last_seen[0]!r}") from None

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
        )

    async def wait_for_pending_interrupt(
        self,
        session_id: str,
        tool_name: str | None = None,
        *,
        within: timedelta = DEFAULT_WAIT,
    ) -> AgentInterrupt:
        """The first pending interrupt (of ``tool_name`` when given)."""
        snapshot = await self.wait_for_snapshot(
            session_id,
            lambda s: any(_matches(i, tool_name) for i in s.pending_interrupts),
            description=f"a pending interrupt{f' for {tool_name}' if tool_name else ''}",
            within=within,
        )
        return next(i for i in snapshot.pending_interrupts if _matches(i, tool_name))

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
        token = ""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        while not until(events):
            if loop.time() >= deadline:
                types = [event.type for event in events]
                raise TimeoutError(f"{session_id}: no {description} in events {types}")
            try:
                message = await self.client.read_stream(
                    session_id, self.flow.agent_events, token, timeout=_EVENT_READ_WAIT
                )
            except dex.LongPollTimeoutError:
                continue
            events.append(message.value)
            token = message.resume_token
        return events

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


TURN_END_EVENTS = frozenset({"turn_completed", "turn_failed", "turn_steered", "turn_cancelled"})


def _matches(interrupt: AgentInterrupt, tool_name: str | None) -> bool:
    return tool_name is None or interrupt.tool_name == tool_name
