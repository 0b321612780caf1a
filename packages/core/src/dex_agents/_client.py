"""``AgentSessionClient``: the typed client of one session Flow type, for applications.

It wraps the session's RPCs and reads its ``AgentEvents`` Stream. Waits are
event-driven. The turn and interrupt waits follow the events that can make their
condition true (a turn's end, a raised interrupt): events are written while a Step
runs, a moment before it commits, so on such an event the wait awaits that Step
execution's commit (``wait_for_step_completion``) and then reads one committed
snapshot; no snapshot is polled while a turn runs. ``send_user_message_and_wait``
returns its turn-end event only after that event's Step committed, so every wait
returns committed state. ``wait_for_snapshot`` with any
condition checks a snapshot on every event and re-reads it every 50 ms while events
come. Either way a quiet session is re-checked less and less often, so a wait
never depends on an event arriving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import dex

from dex_agents._session_settings import validate_session_settings
from dex_agents._values import (
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentStatus,
    AgentUserMessage,
    AnswerQuestionInput,
    CancelTurnInput,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    ResolveInterruptInput,
    SteerUserMessageInput,
    UpdateSessionSettingsInput,
)
from dex_agents.session._flow import AgentSessionFlow

__all__ = [
    "INTERRUPT_EVENTS",
    "TURN_END_EVENTS",
    "AgentSessionClient",
    "SessionEvent",
    "SessionWaitTimeoutError",
]

_LOG = logging.getLogger(__name__)

DEFAULT_WAIT = timedelta(seconds=60)
LOCK_CONFLICT_RETRIES = 20
_LOCK_CONFLICT_BACKOFF_SECONDS = 0.05
_EVENT_LONG_POLL = timedelta(seconds=5)
_TURN_END_EVENTS = frozenset({"turn_completed", "turn_failed"})
_ACTIVE_RECHECK_SECONDS = 0.05
"""Re-check interval while events come: the commit they announce is near."""
_ACTIVE_WINDOW_SECONDS = 2.0
_IDLE_RECHECK_SECONDS = 0.5
"""Longest re-check interval once no event came for ``_ACTIVE_WINDOW_SECONDS``."""
_STREAM_ERROR_BACKOFF_SECONDS = 0.5
_QUIET_RECHECK_SECONDS = 1.0
"""First safety re-check of an event-driven wait that heard no event it follows."""
_QUIET_RECHECK_MAX_SECONDS = 5.0
TURN_END_EVENTS = frozenset({"turn_completed", "turn_failed", "turn_steered", "turn_cancelled"})
"""The event types that end a turn: pass ``wake_on=TURN_END_EVENTS`` to ``wait_for_snapshot``."""
INTERRUPT_EVENTS = frozenset({"interrupt_raised"})
"""The event type that raises an approval or a question."""
_SESSION_START = dex.StepExecutionId("StartAgentSession", 1)
"""The Step that first writes ``AgentState``, and raises no event when no message came."""


class SessionWaitTimeoutError(TimeoutError):
    """A wait of ``AgentSessionClient`` ended before its condition held."""

    __module__ = "dex_agents"  # the public import path, as tracebacks show it


@dataclass(frozen=True)
class SessionEvent:
    """One ``AgentEvents`` message and the token to resume reading after it."""

    event: AgentEvent
    resume_token: str
    created_time: datetime


class AgentSessionClient:
    """Start sessions of one session Flow type, call their RPCs, read and wait on them.

    ``client`` is a Dex ``AsyncClient`` whose Registry holds ``flow``;
    ``AgentHost.client()`` builds one. Approvals and answers retry
    ``RpcLockConflictError``, which the session contract says is safe.
    """

    def __init__(self, client: dex.AsyncClient, flow: AgentSessionFlow) -> None:
        self.client = client
        self.flow = flow

    # --- RPCs ------------------------------------------------------------------------

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        *,
        config: dex.FlowConfig | None = None,
        session_settings: Mapping[str, Any] | None = None,
    ) -> str:
        """Start session ``session_id`` (the Flow ID), with a first user message when given.

        ``config`` overrides the Flow's config. ``session_settings`` are checked with
        ``validate_session_settings`` first. Returns the Dex run ID.
        """
        if session_settings is not None:
            validate_session_settings(session_settings)
        return await self.client.start_flow(
            self.flow,
            session_id,
            AgentSessionStartInput(
                initial_message=initial_message, session_settings=session_settings
            ),
            dex.StartFlowOptions(config_override=config),
        )

    async def update_session_settings(
        self, session_id: str, session_settings: Mapping[str, Any] | None
    ) -> bool:
        """Replace the session's settings; the next turn uses them."""
        return await self.client.invoke_rpc(
            self.flow.update_session_settings,
            session_id,
            UpdateSessionSettingsInput(session_settings=session_settings),
        )

    async def send_user_message(
        self, session_id: str, text: str, *, plan_mode: bool = False
    ) -> bool:
        """Queue a user message; ``False`` when the session refuses it (blank text)."""
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
        """Approve or reject a pending interrupt; ``False`` when it is no longer pending."""
        request = ResolveInterruptInput(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return await _retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.resolve_interrupt, session_id, request)
        )

    async def approve(self, session_id: str, interrupt_id: str) -> bool:
        """Approve the tool call waiting on ``interrupt_id``."""
        return await self.resolve_interrupt(session_id, interrupt_id, True)

    async def reject(self, session_id: str, interrupt_id: str, message: str | None = None) -> bool:
        """Reject the tool call (or decline the question); ``message`` is shown to the model."""
        return await self.resolve_interrupt(session_id, interrupt_id, False, message)

    async def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question; ``False`` when it does not fit or is not pending."""
        request = AnswerQuestionInput(interrupt_id=interrupt_id, answer=answer)
        return await _retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.answer_question, session_id, request)
        )

    async def steer_user_message(
        self, session_id: str, *, text: str | None = None, message_id: str | None = None
    ) -> bool:
        """Steer the active turn with ``text`` or a queued message; queues text between turns."""
        request = SteerUserMessageInput(message_id=message_id, text=text)
        return await self.client.invoke_rpc(self.flow.steer_user_message, session_id, request)

    async def delete_queued_message(self, session_id: str, message_id: str) -> bool:
        """Delete a queued message; ``False`` when it is no longer queued."""
        request = DeleteQueuedMessageInput(message_id=message_id)
        return await self.client.invoke_rpc(self.flow.delete_queued_message, session_id, request)

    async def cancel_turn(self, session_id: str, turn_id: str | None = None) -> bool:
        """Stop the active turn; retries lock conflicts, which the contract says are safe."""
        request = CancelTurnInput(turn_id=turn_id)
        return await _retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.cancel_turn, session_id, request)
        )

    async def execute_plan(self, session_id: str, revision: int) -> bool:
        """Approve plan ``revision``; retries lock conflicts like ``cancel_turn``."""
        request = ExecutePlanInput(revision=revision)
        return await _retrying_lock_conflicts(
            lambda: self.client.invoke_rpc(self.flow.execute_plan, session_id, request)
        )

    async def snapshot(self, session_id: str) -> AgentSnapshot:
        """One committed view of the session."""
        return await self.client.invoke_rpc(self.flow.get_agent_snapshot, session_id)

    async def snapshot_after_event(
        self, session_id: str, event: AgentEvent, *, within: timedelta = timedelta(seconds=5)
    ) -> AgentSnapshot:
        """The snapshot once the Step that wrote ``event`` has committed (or ``within`` has
        passed): a Step's events arrive before its commit, so a snapshot read on the
        event alone may not show what the event announces yet."""
        step = _step_execution(event.step_execution_id)
        if step is not None:
            await self._steps_committed(session_id, [step], within.total_seconds())
        return await self.snapshot(session_id)

    async def list_messages(
        self, session_id: str, *, before_sequence: int | None = None, limit: int | None = None
    ) -> ListAgentMessagesOutput:
        """One page of stored messages, oldest first, ending before ``before_sequence``."""
        return await self.client.invoke_rpc(
            self.flow.list_agent_messages,
            session_id,
            ListAgentMessagesInput(before_sequence=before_sequence, limit=limit),
        )

    async def iter_messages(
        self, session_id: str, *, page_size: int | None = None
    ) -> AsyncGenerator[AgentMessage]:
        """Every stored message, newest page first and oldest first within a page."""
        before: int | None = None
        while True:
            page = await self.list_messages(session_id, before_sequence=before, limit=page_size)
            for message in page.messages:
                yield message
            if page.next_before_sequence is None or not page.messages:
                return
            before = page.next_before_sequence

    # --- events ----------------------------------------------------------------------

    async def latest_event_token(self, session_id: str) -> str:
        """The resume token of the newest retained event, ``""`` when there is none."""
        page = await self.client.list_stream_messages(session_id, self.flow.agent_events, 1)
        return page.messages[0].resume_token if page.messages else ""

    async def events(self, session_id: str, resume_token: str = "") -> AsyncGenerator[SessionEvent]:
        """The session's events after ``resume_token`` (``""``: from the oldest retained one).

        Runs until the caller stops iterating. Keep the last ``resume_token`` to
        resume after a restart; ``latest_event_token`` gives one to follow from now.
        A server that is briefly unreachable is retried.
        """
        token = resume_token
        while True:
            try:
                message = await self.client.read_stream(
                    session_id, self.flow.agent_events, token, _EVENT_LONG_POLL
                )
            except (dex.LongPollTimeoutError, dex.RequestTimeoutError):
                continue
            except dex.DexServiceError as error:
                _LOG.debug("reading events of %s failed (%s); retrying", session_id, error)
                await asyncio.sleep(_STREAM_ERROR_BACKOFF_SECONDS)
                continue
            token = message.resume_token
            yield SessionEvent(message.value, message.resume_token, message.created_time)

    # --- waits -----------------------------------------------------------------------

    async def wait_for_snapshot(
        self,
        session_id: str,
        condition: Callable[[AgentSnapshot], bool],
        *,
        description: str = "the expected session state",
        within: timedelta = DEFAULT_WAIT,
        wake_on: Collection[str] | None = None,
    ) -> AgentSnapshot:
        """The first committed snapshot for which ``condition`` holds.

        ``wake_on`` names the event types after which ``condition`` can first hold
        (``TURN_END_EVENTS`` for an idle session): the wait then reads a snapshot only
        at its start, after the commit of each such event's Step, and on a quiet
        session now and then. ``None`` checks on every event and every 50 ms while
        events come. A snapshot that fails (no Worker yet, or the session is still
        starting) is retried until ``within`` passes; then ``SessionWaitTimeoutError``
        names ``description`` and the last snapshot or error.
        """
        if wake_on is not None:
            return await self._wait_on_events(
                session_id, condition, frozenset(wake_on), description, within
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        woken = asyncio.Event()
        follower = asyncio.create_task(self._wake_on_events(session_id, woken))
        last_seen: object = None
        last_event = loop.time()
        recheck = _ACTIVE_RECHECK_SECONDS
        try:
            while True:
                woken.clear()
                matched, last_seen = await self._snapshot_if(session_id, condition)
                if matched is not None:
                    return matched
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise _timed_out(session_id, within, description, last_seen)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(recheck, remaining)):
                        await woken.wait()
                        last_event = loop.time()
                # Events are written a moment before their Step commits: while they come,
                # re-check often; once the session is quiet, less and less often.
                if loop.time() - last_event < _ACTIVE_WINDOW_SECONDS:
                    recheck = _ACTIVE_RECHECK_SECONDS
                else:
                    recheck = min(recheck * 2, _IDLE_RECHECK_SECONDS)
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower

    async def _snapshot_if(
        self, session_id: str, condition: Callable[[AgentSnapshot], bool]
    ) -> tuple[AgentSnapshot | None, object]:
        """The snapshot when ``condition`` holds for it, and what was read (the snapshot
        or the error)."""
        try:
            snapshot = await self.snapshot(session_id)
        except dex.DexServiceError as error:
            return None, error
        return (snapshot if condition(snapshot) else None), snapshot

    async def _wake_on_events(self, session_id: str, woken: asyncio.Event) -> None:
        try:
            token = await self.latest_event_token(session_id)
        except dex.DexServiceError:
            token = ""
        async for _ in self.events(session_id, token):
            woken.set()

    async def _wait_on_events(
        self,
        session_id: str,
        condition: Callable[[AgentSnapshot], bool],
        wake_on: frozenset[str],
        description: str,
        within: timedelta,
    ) -> AgentSnapshot:
        """``wait_for_snapshot`` woken only by ``wake_on`` events, each after its Step's
        commit: one snapshot at the start and one per such event."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        # The token comes before the first snapshot, so no event after that snapshot is missed.
        try:
            token = await self.latest_event_token(session_id)
        except dex.DexServiceError:
            token = ""
        announced: list[str] = []
        woken = asyncio.Event()
        follower = asyncio.create_task(
            self._note_event_steps(session_id, token, wake_on, announced, woken)
        )
        steps: list[dex.StepExecutionId] = []
        last_seen: object = None
        quiet = _QUIET_RECHECK_SECONDS
        failed = _ACTIVE_RECHECK_SECONDS
        try:
            while True:
                woken.clear()
                if steps:
                    # Capped: a Step commits right after writing these events, and a wait
                    # that outlives the cap (such as for a Step of an earlier run) just
                    # falls back to the snapshot and the quiet re-checks.
                    within_seconds = min(deadline - loop.time(), _QUIET_RECHECK_MAX_SECONDS)
                    await self._steps_committed(session_id, steps, within_seconds)
                matched, last_seen = await self._snapshot_if(session_id, condition)
                if matched is not None:
                    return matched
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise _timed_out(session_id, within, description, last_seen)
                if isinstance(last_seen, AgentSnapshot) and last_seen.state is None:
                    # Started but not initialized: its first Step's commit says when.
                    steps = [_SESSION_START]
                    continue
                if isinstance(last_seen, AgentSnapshot):
                    pause, failed = quiet, _ACTIVE_RECHECK_SECONDS
                else:
                    pause, failed = failed, min(failed * 2, _IDLE_RECHECK_SECONDS)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(pause, remaining)):
                        await woken.wait()
                if woken.is_set():
                    quiet = _QUIET_RECHECK_SECONDS
                else:
                    quiet = min(quiet * 2, _QUIET_RECHECK_MAX_SECONDS)
                steps = [step for step in map(_step_execution, announced) if step is not None]
                announced.clear()
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower

    async def _note_event_steps(
        self,
        session_id: str,
        token: str,
        wake_on: frozenset[str],
        announced: list[str],
        woken: asyncio.Event,
    ) -> None:
        """Collect the Step execution of every ``wake_on`` event and wake the wait."""
        async for item in self.events(session_id, token):
            if item.event.type in wake_on:
                if item.event.step_execution_id not in announced:
                    announced.append(item.event.step_execution_id)
                woken.set()

    async def _step_committed(self, session_id: str, step_execution_id: str) -> None:
        """Until the Step execution that wrote an event has ended (committed); a session
        that closed meanwhile has committed it too. The caller bounds the wait."""
        step = _step_execution(step_execution_id)
        if step is None:
            return
        with contextlib.suppress(dex.FlowNotActiveOrNotFoundError):
            await self.client.wait_for_step_completion(
                session_id, step, dex.WaitForStepCompletionOptions()
            )

    async def _steps_committed(
        self, session_id: str, steps: list[dex.StepExecutionId], within_seconds: float
    ) -> None:
        """Until every Step execution of ``steps`` has ended (or ``within_seconds`` pass):
        a Step's events arrive before its commit."""
        if within_seconds <= 0:
            return
        options = dex.WaitForStepCompletionOptions()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_seconds):
                await asyncio.gather(
                    *(
                        self.client.wait_for_step_completion(session_id, step, options)
                        for step in steps
                    ),
                    return_exceptions=True,
                )

    async def wait_for_turn(
        self, session_id: str, turn_count: int | None = None, *, within: timedelta = DEFAULT_WAIT
    ) -> AgentSnapshot:
        """Until no turn runs, no message is queued, and (when given) ``turn_count`` turns ended.

        Returns the snapshot; its ``state.last_turn_error`` tells a failed turn.
        A turn waiting on an approval or a question is still running.
        """
        return await self.wait_for_snapshot(
            session_id,
            lambda s: _is_idle(s) and (turn_count is None or _turns(s) >= turn_count),
            description="the turn to finish"
            if turn_count is None
            else f"{turn_count} finished turns",
            within=within,
            wake_on=TURN_END_EVENTS,
        )

    async def send_user_message_and_wait(
        self,
        session_id: str,
        text: str,
        *,
        resume_token: str | None = None,
        within: timedelta = DEFAULT_WAIT,
    ) -> SessionEvent:
        """Send ``text`` and follow the event stream until the turn that takes it ends.

        Returns that turn's ``turn_completed`` or ``turn_failed`` event once the Step
        that wrote it has committed, so a ``snapshot()`` read after it shows the turn
        (the event itself arrives a moment before that commit). Keep the event's
        ``resume_token`` and pass it to the next call to skip the lookup of the
        newest token. The turn is the first one to start after ``resume_token``
        (after the newest event when ``None``), so send through one client at a
        time per session. This is one stream followed per turn and one wait for a
        commit, no snapshot reads: the cheapest wait for the next reply. Raises
        ``ValueError`` when the session refuses the message,
        ``SessionWaitTimeoutError`` after ``within`` (the commit included); a turn
        waiting on an approval or a question has not ended yet.
        """
        token = await self.latest_event_token(session_id) if resume_token is None else resume_token
        if not await self.send_user_message(session_id, text):
            raise ValueError(f"{session_id} refused the user message (blank text)")
        turn_id: str | None = None
        try:
            async with asyncio.timeout(within.total_seconds()):
                async for event in self.events(session_id, token):
                    value = event.event
                    if turn_id is None and value.type == "turn_started":
                        turn_id = value.turn_id
                    elif value.turn_id == turn_id and value.type in _TURN_END_EVENTS:
                        await self._step_committed(session_id, value.step_execution_id)
                        return event
        except TimeoutError:
            raise SessionWaitTimeoutError(
                f"{session_id}: timed out after {within.total_seconds():g}s waiting for"
                f" {turn_id or 'the turn that takes the message'} to end"
            ) from None
        raise AssertionError("unreachable: the event stream does not end")

    async def wait_for_interrupt(
        self, session_id: str, tool_name: str | None = None, *, within: timedelta = DEFAULT_WAIT
    ) -> AgentInterrupt:
        """The first pending approval or question (of ``tool_name`` when given)."""
        snapshot = await self.wait_for_snapshot(
            session_id,
            lambda s: any(_matches(i, tool_name) for i in s.pending_interrupts),
            description=f"a pending interrupt{f' for {tool_name}' if tool_name else ''}",
            within=within,
            wake_on=INTERRUPT_EVENTS,
        )
        return next(i for i in snapshot.pending_interrupts if _matches(i, tool_name))

    async def wait_for_turn_or_interrupt(
        self, session_id: str, *, within: timedelta = DEFAULT_WAIT
    ) -> AgentSnapshot:
        """Until the session is idle (as in ``wait_for_turn``) or has a pending interrupt.

        ``snapshot.pending_interrupts`` is empty when the turn finished.
        """
        return await self.wait_for_snapshot(
            session_id,
            lambda s: bool(s.pending_interrupts) or _is_idle(s),
            description="the turn to finish or an interrupt",
            within=within,
            wake_on=TURN_END_EVENTS | INTERRUPT_EVENTS,
        )


def _timed_out(
    session_id: str, within: timedelta, description: str, last_seen: object
) -> SessionWaitTimeoutError:
    return SessionWaitTimeoutError(
        f"{session_id}: timed out after {within.total_seconds():g}s waiting for"
        f" {description}; last snapshot or error: {last_seen!r}"
    )


def _step_execution(step_execution_id: str) -> dex.StepExecutionId | None:
    """``RunModel-3`` as a ``StepExecutionId``; ``None`` for an event without a Step."""
    step_type, _, number = step_execution_id.rpartition("-")
    if not step_type or not number.isdigit():
        return None
    return dex.StepExecutionId(step_type, int(number))


def _is_idle(snapshot: AgentSnapshot) -> bool:
    state = snapshot.state
    return (
        state is not None
        and state.active_turn_id is None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        and snapshot.queued_message_count == 0
    )


def _turns(snapshot: AgentSnapshot) -> int:
    return snapshot.state.turn_count if snapshot.state is not None else 0


def _matches(interrupt: AgentInterrupt, tool_name: str | None) -> bool:
    return tool_name is None or interrupt.tool_name == tool_name


async def _retrying_lock_conflicts(call: Callable[[], Awaitable[bool]]) -> bool:
    for attempt in range(LOCK_CONFLICT_RETRIES):
        try:
            return await call()
        except dex.RpcLockConflictError:
            if attempt == LOCK_CONFLICT_RETRIES - 1:
                raise
            await asyncio.sleep(_LOCK_CONFLICT_BACKOFF_SECONDS * (attempt + 1))
    raise AssertionError("unreachable")
