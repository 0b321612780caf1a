"""Each session's model input, kept per Worker and extended as the session grows.

Every model Step gives Pydantic AI the whole stored history. Even with each item
decoded once per process (``decode_history``), copying every message and pairing
every tool call again costs a Step more the longer the session is.
``SessionHistories`` keeps, per session, the paired history of the stored
messages its last model Step read; the next Step of the session reuses it when
its stored messages start with the same items (compared by their text, so a
reused message is never stale) and decodes, copies and pairs only the messages
stored since.

The kept messages are the session's own copies, never shared with another
session, and every run of the session gets them, as a plain caller's history
is given to every run. Pydantic AI fills run metadata into, and adds parts to,
the end of a run's history (the request after the last model response; 2.68 does
so on its own copies, but the runner does not rely on that), so the messages from
the last model response on are fresh copies on every Step and are never kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelResponse

from dex_agents import AgentMessage
from dex_agents_pydantic_ai.messages import answer_orphaned_tool_calls, decode_history

__all__ = ["DEFAULT_KEPT_SESSIONS", "SessionHistories"]

DEFAULT_KEPT_SESSIONS = 256
"""Sessions whose history a Worker keeps; the least recently used one goes first."""


@dataclass(frozen=True)
class _Kept:
    texts: tuple[str, ...]
    """The ``framework_item`` of each stored message the history covers, in order."""
    history: tuple[ModelMessage, ...]
    """Their paired history (``answer_orphaned_tool_calls``)."""


class SessionHistories:
    """The paired Pydantic AI history of each session's stored messages; see the module."""

    def __init__(self, max_sessions: int = DEFAULT_KEPT_SESSIONS) -> None:
        if max_sessions < 0:
            raise ValueError("max_sessions must not be negative")
        self.max_sessions = max_sessions
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()
        self.reused_messages = 0
        """Stored messages served from a kept history (for tests and benchmarks)."""

    def history(self, session_id: str, messages: Sequence[AgentMessage]) -> list[ModelMessage]:
        """``answer_orphaned_tool_calls(decode_history(messages))``, reusing what this
        session's previous Step decoded; the caller may change the list it gets."""
        texts = tuple(message.framework_item for message in messages)
        with self._lock:
            kept = self._kept.get(session_id)
        if kept is not None and texts[: len(kept.texts)] == kept.texts:
            history = self._build(session_id, messages, texts, kept)
            if history is not None:
                return history
        history = self._build(session_id, messages, texts, None)
        assert history is not None
        return history

    def _build(
        self,
        session_id: str,
        messages: Sequence[AgentMessage],
        texts: tuple[str, ...],
        kept: _Kept | None,
    ) -> list[ModelMessage] | None:
        """The history from ``kept`` and the messages after it; ``None`` when the end of
        the history, which Pydantic AI changes, would be a kept message."""
        reused = kept.history if kept is not None else ()
        start = len(kept.texts) if kept is not None else 0
        # One list per stored message, so the kept part ends at a stored message.
        fresh = [decode_history([message]) for message in messages[start:]]
        paired = answer_orphaned_tool_calls(
            [item for items in fresh for item in items],
            previous=reused[-1] if reused else None,
        )
        history = [*reused, *paired]
        tail = _last_response_index(history)
        if tail < len(reused):
            return None
        kept_texts, kept_messages = start, len(reused)
        for items in fresh:
            if kept_messages + len(items) > tail:
                break
            kept_messages += len(items)
            kept_texts += 1
        entry = _Kept(texts[:kept_texts], tuple(history[:kept_messages]))
        with self._lock:
            self.reused_messages += start
            self._kept[session_id] = entry
            self._kept.move_to_end(session_id)
            while len(self._kept) > self.max_sessions:
                self._kept.popitem(last=False)
        return history

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


def _last_response_index(history: Sequence[ModelMessage]) -> int:
    """The index of the last model response, or 0 when there is none."""
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index], ModelResponse):
            return index
    return 0
