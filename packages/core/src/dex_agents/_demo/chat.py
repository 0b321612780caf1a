"""The demo's terminal chat: live events, approvals, questions and durable waits.

Everything shown comes from the session itself: reply text and tool activity
from the ``AgentEvents`` Stream, pending approvals and questions from
``get_agent_snapshot``. Answers go back through the session's RPCs, so the chat
works the same against any Worker, and a restarted demo picks up where it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import dex

from dex_agents._client import AgentSessionClient
from dex_agents._values import (
    AgentEvent,
    AgentInterrupt,
    AgentPlan,
    AgentSnapshot,
    AgentToolCallStatus,
    InterruptKind,
    parse_timestamp,
)

__all__ = ["Chat", "Prompter"]

Prompter = Callable[[str], Awaitable[str | None]]
"""Reads one line from the user; ``None`` at end of input."""

_TURN_END_EVENTS = frozenset({"turn_completed", "turn_failed", "turn_cancelled", "turn_steered"})
_WAKE_EVENTS = _TURN_END_EVENTS | {"interrupt_raised", "tool_call_finished", "timer_started"}
_OUTPUT_PREVIEW = 160
_POLL_SECONDS = 1.0
_WAIT_REPORT_SECONDS = 5.0
_TURN_END_EVENT_WAIT_SECONDS = 5.0


def _preview(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= _OUTPUT_PREVIEW else flat[: _OUTPUT_PREVIEW - 1] + "…"


class Chat:
    """One session's terminal conversation.

    ``prompt`` reads the user's lines. Without a terminal (``interactive`` false)
    approvals are granted only with ``auto_approve``, and questions get their
    first choice.
    """

    def __init__(
        self,
        sessions: AgentSessionClient,
        session_id: str,
        *,
        prompt: Prompter,
        out: TextIO = sys.stdout,
        interactive: bool = True,
        auto_approve: bool = False,
        reads_during_turns: bool = False,
    ) -> None:
        self.sessions = sessions
        self.session_id = session_id
        self._read_line = prompt
        self.out = out
        self.interactive = interactive
        self.auto_approve = auto_approve
        self.failed_turns: list[str] = []
        self._activity = asyncio.Event()
        self._ended_turns: set[str] = set()
        self._turn_ended = asyncio.Event()
        self._turns_with_text: set[str] = set()
        self._handled_interrupts: set[str] = set()
        self._mid_line = False
        self._live_attempt: dict[str, int] = {}
        self._follower: asyncio.Task[None] | None = None
        self._shown_plan_revision: int | None = None
        # One outstanding read of the user's next line: a turn's commands and the next
        # prompt share it, so a line typed while a turn runs is never lost.
        self.reads_during_turns = reads_during_turns
        self._pending_line: asyncio.Task[str | None] | None = None

    # --- output ----------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._mid_line = not text.endswith("\n")

    async def prompt(self, text: str) -> str | None:
        """Ask the user for one line; ``None`` at end of input."""
        if self._mid_line:
            self._write("\n")
        self._write(text)
        line = await self._next_line()
        self._pending_line = None
        self._mid_line = False
        return line

    def _next_line(self) -> asyncio.Task[str | None]:
        """The outstanding read of the next line, started when none is."""
        if self._pending_line is None:
            self._pending_line = asyncio.ensure_future(self._read_line(""))
            # A line typed while a turn runs wakes the turn's follower.
            self._pending_line.add_done_callback(lambda _: self._activity.set())
        return self._pending_line

    async def _line_during_turn(self, line: str | None) -> None:
        """A line typed while a turn runs: a command, or a message queued for the next turn."""
        if line is None or not line.strip():
            return
        command, _, rest = line.strip().partition(" ")
        if command == "/cancel":
            await self.cancel()
        elif command == "/steer" and rest.strip():
            accepted = await self.sessions.steer_user_message(self.session_id, text=rest)
            self.say("  [steered]" if accepted else "  (the session did not accept that steer)")
        else:
            await self.sessions.send_user_message(self.session_id, line)
            self.say("  [queued for the next turn]")

    def say(self, line: str) -> None:
        """Print a whole line, after any reply text still on the current line."""
        if self._mid_line:
            self._write("\n")
        self._write(line + "\n")

    # --- session lifecycle -----------------------------------------------------------

    async def open(self) -> bool:
        """Start the session, or attach to it when it exists; True when it existed."""
        snapshot = await self._snapshot_or_none()
        existed = snapshot is not None and snapshot.state is not None
        if not existed:
            await self.sessions.start_session(self.session_id)
        token = await self.sessions.latest_event_token(self.session_id)
        self._follower = asyncio.create_task(self._follow_events(token))
        return existed

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._follower
            self._follower = None
        if self._mid_line:
            self._write("\n")

    async def _snapshot_or_none(self) -> AgentSnapshot | None:
        try:
            return await self.snapshot()
        except (dex.FlowNotFoundError, dex.FlowNotActiveOrNotFoundError):
            return None

    async def snapshot(self) -> AgentSnapshot:
        return await self.sessions.snapshot(self.session_id)

    def show_history(self, snapshot: AgentSnapshot, limit: int = 8) -> None:
        """Print the latest user and agent messages of the session."""
        shown = [m for m in snapshot.messages if m.role in ("user", "assistant") and m.text][
            -limit:
        ]
        if shown:
            self.say("Earlier in this session:")
        for message in shown:
            who = "you" if message.role == "user" else "agent"
            self.say(f"  {who}> {_preview(message.text)}")

    # --- events ----------------------------------------------------------------------

    async def _follow_events(self, token: str) -> None:
        while True:
            try:
                async for item in self.sessions.events(self.session_id, token):
                    token = item.resume_token
                    await self._show_event(item.event)
            except Exception as error:  # keep the chat alive; the snapshot loop still works
                self.say(f"  (event stream: {error}; retrying)")
                await asyncio.sleep(1)

    async def _show_event(self, event: AgentEvent) -> None:
        payload: dict[str, Any] = json.loads(event.payload) if event.payload else {}
        kind = event.type
        if kind in ("text_delta", "reasoning_delta"):
            key = f"{event.turn_id}/{event.step_execution_id}"
            seen = self._live_attempt.get(key)
            if seen is not None and event.attempt < seen:
                return  # text of an attempt that was retried
            if seen is not None and event.attempt > seen:
                self.say("  (the model call is retried; its reply starts over)")
            self._live_attempt[key] = event.attempt
            text = str(payload.get("text", ""))
            if kind == "reasoning_delta":
                self.say(f"  (thinking) {_preview(text)}")
            else:
                if not self._mid_line:
                    self._write("agent> ")
                self._turns_with_text.add(event.turn_id)
                self._write(text)
        elif kind == "tool_call_deferred":
            approval = ", needs approval" if payload.get("requires_approval") else ""
            self.say(
                f"  [tool] {payload.get('tool_name')} requested ({payload.get('effect')}{approval})"
            )
        elif kind == "tool_call_started":
            self.say(f"  [tool] {payload.get('tool_name')} running")
        elif kind == "tool_call_finished":
            await self._show_finished_tool(event, payload)
        elif kind == "timer_started":
            until, reason = payload.get("wait_until"), payload.get("reason")
            self.say(f"  [wait] durable timer until {until} ({reason})")
        elif kind == "turn_failed":
            self.failed_turns.append(event.turn_id)
            self.say(f"  [turn failed] {payload.get('error')}")
        elif kind == "turn_cancelled":
            self.say("  [turn cancelled]")
        elif kind == "turn_steered":
            self.say("  [turn redirected by your new message]")
        if kind in _TURN_END_EVENTS:
            self._ended_turns.add(event.turn_id)
            self._turn_ended.set()
            if self._mid_line:
                self._write("\n")
        if kind in _WAKE_EVENTS:
            self._activity.set()

    async def _show_finished_tool(self, event: AgentEvent, payload: dict[str, Any]) -> None:
        tool_call_id = str(payload.get("tool_call_id"))
        status = str(payload.get("status"))
        detail = ""
        with contextlib.suppress(Exception):
            snapshot = await self.sessions.snapshot_after_event(self.session_id, event)
            detail = _tool_detail(snapshot, tool_call_id)
        suffix = f": {_preview(detail)}" if detail else ""
        self.say(f"  [tool] {payload.get('tool_name')} {status}{suffix}")

    # --- turns -----------------------------------------------------------------------

    async def run_command(self, line: str) -> bool:
        """Handle ``/steer TEXT``, ``/cancel``, ``/plan TEXT`` and ``/execute``; ``False`` for
        anything else, which is a message."""
        command, _, rest = line.strip().partition(" ")
        if command == "/plan":
            await self.send(rest, plan_mode=True)
        elif command == "/execute":
            await self.execute_plan()
        elif command == "/steer":
            await self.steer(rest)
        elif command == "/cancel":
            await self.cancel()
        else:
            return False
        return True

    async def steer(self, text: str) -> bool:
        """Redirect the running turn with ``text``; between turns it starts the next one."""
        before = await self.snapshot()
        turns_before = before.state.turn_count if before.state else 0
        accepted = await self.sessions.steer_user_message(self.session_id, text=text)
        if not accepted:
            self.say("  (the session did not accept that steer)")
            return False
        await self.follow_turns(turns_before + 1)
        return True

    async def cancel(self) -> bool:
        """Stop the running turn."""
        stopped = await self.sessions.cancel_turn(self.session_id)
        self.say("  [stop requested]" if stopped else "  (no turn is running)")
        return stopped

    async def execute_plan(self) -> bool:
        """Approve the current plan revision and follow the turn that executes it."""
        snapshot = await self.snapshot()
        plan = snapshot.plan
        if plan is None or plan.status not in ("draft", "active"):
            self.say("  (no plan to execute; write one with /plan TEXT)")
            return False
        turns_before = snapshot.state.turn_count if snapshot.state else 0
        approved = await self.sessions.execute_plan(self.session_id, plan.revision)
        if not approved:
            self.say("  (the session did not accept the plan now)")
            return False
        await self.follow_turns(turns_before + 1)
        return True

    def show_plan(self, plan: AgentPlan | None) -> None:
        """Print the plan when its revision is new to this chat."""
        if plan is None or plan.revision == self._shown_plan_revision:
            return
        self._shown_plan_revision = plan.revision
        self.say(f"  [plan] revision {plan.revision}, {plan.status}")
        marks = {"pending": " ", "in_progress": ">", "completed": "x"}
        for task in plan.tasks:
            self.say(f"    [{marks[task.status]}] {task.content}")
        if plan.status == "draft":
            self.say("  (type /execute to run this plan, or reply to revise it)")

    async def send(self, text: str, *, plan_mode: bool = False) -> bool:
        """Send ``text`` and follow the turn it starts until it ends."""
        before = await self.snapshot()
        turns_before = before.state.turn_count if before.state else 0
        accepted = await self.sessions.send_user_message(self.session_id, text, plan_mode=plan_mode)
        if not accepted:
            self.say("  (the session did not accept that message)")
            return False
        await self.follow_turns(turns_before + 1)
        return True

    async def follow_turns(self, turn_count: int) -> None:
        """Handle approvals and questions until ``turn_count`` turns ended and nothing runs.

        With ``reads_during_turns``, a line typed meanwhile is ``/cancel``, ``/steer TEXT``,
        or a message queued for the next turn.
        """
        last_wait_report = 0.0
        loop = asyncio.get_running_loop()
        while True:
            typed = self._pending_line
            if typed is not None and typed.done():
                self._pending_line = None
                await self._line_during_turn(typed.result())
                turn_count = max(turn_count, await self._turns_to_follow(turn_count))
            snapshot = await self.snapshot()
            for interrupt in snapshot.pending_interrupts:
                if interrupt.interrupt_id not in self._handled_interrupts:
                    self._handled_interrupts.add(interrupt.interrupt_id)
                    await self._resolve(interrupt)
            state = snapshot.state
            if (
                state is not None
                and state.turn_count >= turn_count
                and state.active_turn_id is None
                and snapshot.queued_message_count == 0
            ):
                await self._finish_turn(f"turn-{state.turn_count}", snapshot)
                return
            due = loop.time() - last_wait_report >= _WAIT_REPORT_SECONDS
            if due and self._report_waits(snapshot):
                last_wait_report = loop.time()
            self._activity.clear()
            if self.reads_during_turns:
                self._next_line()
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation
            # (Ctrl-C) that arrives while the event wakes it, and the demo would not stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_POLL_SECONDS):
                    await self._activity.wait()

    async def _turns_to_follow(self, turn_count: int) -> int:
        """After a typed line: also follow the turn a queued or steered message starts."""
        snapshot = await self.snapshot()
        state = snapshot.state
        if state is None:
            return turn_count
        waiting = snapshot.queued_message_count + len(snapshot.steered_messages)
        return state.turn_count + (1 if waiting else 0)

    def _report_waits(self, snapshot: AgentSnapshot) -> bool:
        reported = False
        now = datetime.now(UTC)
        for record in snapshot.tool_calls:
            if record.status is AgentToolCallStatus.WAITING_FOR_TIMER and record.wait_until:
                left = (parse_timestamp(record.wait_until) - now).total_seconds()
                self.say(f"  [wait] {max(0, round(left))} s left on the durable timer")
                reported = True
        return reported

    async def _finish_turn(self, turn_id: str, snapshot: AgentSnapshot) -> None:
        # The events may trail the committed state a little; wait briefly for the turn's end.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_TURN_END_EVENT_WAIT_SECONDS):
                while turn_id not in self._ended_turns:
                    self._turn_ended.clear()
                    await self._turn_ended.wait()
        if turn_id not in self._turns_with_text:
            replies = [
                m for m in snapshot.messages if m.turn_id == turn_id and m.role == "assistant"
            ]
            if replies and replies[-1].text:
                self.say(f"agent> {replies[-1].text}")
        if self._mid_line:
            self._write("\n")
        self.show_plan(snapshot.plan)

    # --- approvals and questions -----------------------------------------------------

    async def _resolve(self, interrupt: AgentInterrupt) -> None:
        if interrupt.kind is InterruptKind.QUESTION:
            await self._answer(interrupt)
        else:
            await self._approve(interrupt)

    async def _approve(self, interrupt: AgentInterrupt) -> None:
        self.say(f"  [approval] {interrupt.tool_name} {interrupt.arguments}")
        approved = True
        reason: str | None = None
        if self.auto_approve:
            self.say("  [approval] approved automatically (--auto-approve)")
        elif not self.interactive:
            approved = False
            reason = "Not approved: the demo ran without a terminal and without --auto-approve."
            self.say("  [approval] rejected (no terminal; pass --auto-approve to approve)")
        else:
            while True:
                line = await self.prompt("  Approve? [y]es / [n]o: ")
                choice = (line or "n").strip().lower()
                if choice in ("y", "yes"):
                    break
                if choice in ("n", "no"):
                    approved = False
                    reason = (
                        await self.prompt("  Reason for the agent (optional): ") or ""
                    ).strip()
                    reason = reason or None
                    break
        accepted = await self.sessions.resolve_interrupt(
            self.session_id, interrupt.interrupt_id, approved, reason
        )
        if not accepted:
            self.say("  (that approval is no longer pending)")

    async def _answer(self, interrupt: AgentInterrupt) -> None:
        choices: Sequence[str] = interrupt.choices or ()
        self.say(f"  [question] {interrupt.question}")
        for number, choice in enumerate(choices, start=1):
            self.say(f"    {number}. {choice}")
        free_text = interrupt.allows_free_text is not False
        answer: str | None
        if not self.interactive:
            answer = choices[0] if choices else "yes"
            self.say(f"  [question] answered automatically: {answer}")
        else:
            hint = "number or text" if choices and free_text else ("number" if choices else "text")
            line = await self.prompt(f"  Your answer ({hint}; empty declines): ")
            answer = (line or "").strip() or None
            if answer is not None and answer.isdigit() and 1 <= int(answer) <= len(choices):
                answer = choices[int(answer) - 1]
        if answer is None:
            accepted = await self.sessions.reject(self.session_id, interrupt.interrupt_id)
        else:
            accepted = await self.sessions.answer_question(
                self.session_id, interrupt.interrupt_id, answer
            )
        if not accepted:
            self.say("  (the session refused that answer; it may not be one of the choices)")
            self._handled_interrupts.discard(interrupt.interrupt_id)


def _tool_detail(snapshot: AgentSnapshot, tool_call_id: str) -> str:
    """What a finished call gave: its record while its turn runs, else its stored result
    message (a turn that has already ended keeps no records)."""
    for record in snapshot.tool_calls:
        if record.tool_call_id == tool_call_id:
            return record.output or record.error or record.rejection_message or ""
    for message in reversed(snapshot.messages):
        if message.role == "tool" and message.tool_call_id == tool_call_id:
            return message.tool_output or message.text or ""
    return ""
