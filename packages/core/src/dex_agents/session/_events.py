"""The ``AgentEvents`` writer of one Step attempt.

Events are best effort: a write never fails the Step. Consecutive text or
reasoning deltas are merged into one Stream message for up to 100 ms or 1,024
characters, so a token-by-token model stream does not write one message per
token. After the Step handler returns, the writer is closed and drops writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dex import AsyncContext, Stream

from dex_agents._values import AgentEvent, AgentToolCallStatus

__all__ = ["DELTA_FLUSH_CHARACTERS", "DELTA_FLUSH_SECONDS", "DeltaBuffer", "SessionEventWriter"]

_log = logging.getLogger(__name__)

DELTA_FLUSH_SECONDS = 0.1
DELTA_FLUSH_CHARACTERS = 1024
_DELTA_TYPES = frozenset({"text_delta", "reasoning_delta"})


@dataclass
class DeltaBuffer:
    """Pending text of consecutive deltas of one type; pure, so it is tested without Dex."""

    type: str | None = None
    parts: list[str] = field(default_factory=lambda: list[str]())
    size: int = 0

    def add(self, type: str, text: str) -> list[tuple[str, str]]:
        """Buffer ``text``; return the merged deltas that must be written now, in order."""
        flushed: list[tuple[str, str]] = []
        if self.type is not None and self.type != type:
            flushed.extend(self.drain())
        self.type = type
        self.parts.append(text)
        self.size += len(text)
        if self.size >= DELTA_FLUSH_CHARACTERS:
            flushed.extend(self.drain())
        return flushed

    def drain(self) -> list[tuple[str, str]]:
        """Everything buffered, as at most one merged delta."""
        if self.type is None or not self.parts:
            self.type, self.parts, self.size = None, [], 0
            return []
        merged = (self.type, "".join(self.parts))
        self.type, self.parts, self.size = None, [], 0
        return [merged]

    @property
    def is_empty(self) -> bool:
        return not self.parts


class SessionEventWriter:
    """``AgentEventWriter`` bound to one turn, Step execution and attempt.

    Safe to call from a worker thread: such calls are handed to the Step's event loop.
    """

    def __init__(
        self,
        context: AsyncContext,
        stream: Stream[AgentEvent],
        *,
        turn_id: str,
    ) -> None:
        self._context = context
        self._stream = stream
        self._turn_id = turn_id
        self._attempt = context.attempt
        self._step_execution_id = context.step_execution_id
        self._loop = asyncio.get_running_loop()
        self._thread_id = threading.get_ident()
        self._buffer = DeltaBuffer()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._written = 0

    @property
    def turn_id(self) -> str:
        return self._turn_id

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def step_execution_id(self) -> str:
        return self._step_execution_id

    @property
    def written(self) -> int:
        """Events handed to Dex so far: each one is output of this attempt."""
        return self._written

    def write_text_delta(self, text: str) -> None:
        self._dispatch(self._delta, "text_delta", text)

    def write_reasoning_delta(self, text: str) -> None:
        self._dispatch(self._delta, "reasoning_delta", text)

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        self.write_event(
            "tool_call_started", {"tool_call_id": tool_call_id, "tool_name": tool_name}
        )

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: AgentToolCallStatus | str
    ) -> None:
        value = status.value if isinstance(status, AgentToolCallStatus) else str(status)
        self.write_event(
            "tool_call_finished",
            {"tool_call_id": tool_call_id, "tool_name": tool_name, "status": value},
        )

    def write_event(self, type: str, payload: Mapping[str, Any]) -> None:
        if not isinstance(type, str) or not type:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("event type must be non-empty text")
        try:
            text = json.dumps(
                dict(payload), separators=(",", ":"), sort_keys=True, ensure_ascii=False
            )
        except (TypeError, ValueError) as error:
            # Events are best effort: a payload that is not JSON is dropped, not raised.
            _log.warning("dropped %s event: its payload is not JSON (%s)", type, error)
            return
        if type in _DELTA_TYPES:
            # A delta written as a plain event still merges with its neighbours.
            delta = json.loads(text).get("text")
            if isinstance(delta, str):
                self._dispatch(self._delta, type, delta)
                return
        self._dispatch(self._event, type, text)

    def close(self) -> None:
        """Write what is buffered and drop every later write."""
        if self._closed:
            return
        self._flush()
        self._closed = True

    # --- on the Step's event loop ---

    def _dispatch(self, method: Callable[[str, str], None], type: str, text: str) -> None:
        if threading.get_ident() == self._thread_id:
            method(type, text)
        else:
            self._loop.call_soon_threadsafe(method, type, text)

    def _delta(self, type: str, text: str) -> None:
        if self._closed or not text:
            return
        for merged_type, merged_text in self._buffer.add(type, text):
            self._write(merged_type, _delta_payload(merged_text))
        if self._buffer.is_empty:
            self._cancel_timer()
        elif self._timer is None:
            self._timer = self._loop.call_later(DELTA_FLUSH_SECONDS, self._flush)

    def _event(self, type: str, payload_text: str) -> None:
        if self._closed:
            return
        self._flush()
        self._write(type, payload_text)

    def _flush(self) -> None:
        self._cancel_timer()
        if self._closed:
            return
        for merged_type, merged_text in self._buffer.drain():
            self._write(merged_type, _delta_payload(merged_text))

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _write(self, type: str, payload_text: str) -> None:
        event = AgentEvent(
            type=type,
            turn_id=self._turn_id,
            attempt=self._attempt,
            step_execution_id=self._step_execution_id,
            payload=payload_text,
        )
        try:
            self._stream.write(self._context, event)
        except Exception as error:  # events are best effort; a write never fails the Step
            _log.debug("dropped %s event: %s", type, error)
        else:
            self._written += 1


def _delta_payload(text: str) -> str:
    return json.dumps({"text": text}, separators=(",", ":"), ensure_ascii=False)
