"""Streams: best-effort, resumable message logs per Flow, with a byte budget per Flow type.

A Stream is named within a Flow type; each Flow ID has its own ordered log in it. The
byte budget (``stream_capacity_bytes`` of the latest write) is shared by every Flow of
that type: when the retained bytes go over it, the oldest messages across all those
Flows are trimmed first. The newest message is always kept. Resume tokens are the
decimal sequence number of a message within its Flow's log.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dex.dexpb import dex_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp

from dex_local_engine._store.store import Store

DEFAULT_CAPACITY_BYTES = 64 * 1024 * 1024
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


@dataclass
class _Message:
    row_id: int
    seq: int
    value: bytes
    created: float
    source: str

    def to_proto(self) -> pb.StreamMessage:
        """The message as the SDK receives it."""
        created = Timestamp()
        created.FromNanoseconds(int(self.created * 1e9))
        value = pb.Value()
        value.ParseFromString(self.value)
        return pb.StreamMessage(
            value=value, resume_token=str(self.seq), created_time=created, source=self.source
        )


@dataclass
class _Log:
    messages: deque[_Message] = field(default_factory=lambda: deque())
    next_seq: int = 1
    changed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Budget:
    capacity: int = DEFAULT_CAPACITY_BYTES
    total: int = 0
    order: deque[tuple[str, int, int]] = field(default_factory=lambda: deque())  # flow, row, size


class StreamStore:
    """All Streams of the engine; used only from the engine's event loop."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._logs: dict[tuple[str, str, str], _Log] = {}
        self._budgets: dict[tuple[str, str], _Budget] = {}

    def load(self) -> None:
        """Load the retained Stream messages from the store."""
        for row in self._store.stream_messages():
            log = self._log(row.flow_type, row.stream, row.flow_id)
            log.messages.append(_Message(row.row_id, row.seq, row.value, row.created, row.source))
            log.next_seq = max(log.next_seq, row.seq + 1)
            budget = self._budgets.setdefault((row.flow_type, row.stream), _Budget())
            budget.total += row.size
            budget.order.append((row.flow_id, row.row_id, row.size))

    def _log(self, flow_type: str, stream: str, flow_id: str) -> _Log:
        key = (flow_type, stream, flow_id)
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _Log()
        return log

    def write(
        self,
        *,
        flow_type: str,
        stream: str,
        flow_id: str,
        value: pb.Value,
        capacity: int,
        source: str,
    ) -> None:
        """Append a message and trim the Stream to its byte budget."""
        log = self._log(flow_type, stream, flow_id)
        budget = self._budgets.setdefault((flow_type, stream), _Budget())
        if capacity > 0:
            budget.capacity = capacity
        data = value.SerializeToString()
        now = time.time()
        seq = log.next_seq
        log.next_seq += 1
        with self._store.transaction():
            row_id = self._store.add_stream_message(
                flow_type, stream, flow_id, seq, data, now, source
            )
            log.messages.append(_Message(row_id, seq, data, now, source))
            budget.total += len(data)
            budget.order.append((flow_id, row_id, len(data)))
            self._trim(flow_type, stream, budget)
        log.changed.set()
        log.changed = asyncio.Event()

    def _trim(self, flow_type: str, stream: str, budget: _Budget) -> None:
        removed: list[int] = []
        while budget.total > budget.capacity and len(budget.order) > 1:
            flow_id, row_id, size = budget.order.popleft()
            budget.total -= size
            removed.append(row_id)
            log = self._logs.get((flow_type, stream, flow_id))
            if log is not None and log.messages and log.messages[0].row_id == row_id:
                log.messages.popleft()
        if removed:
            self._store.delete_stream_messages(removed)

    def first_after(
        self, flow_type: str, stream: str, flow_id: str, resume_token: str
    ) -> pb.StreamMessage | None:
        """The first retained message after a resume token, if any."""
        after = parse_token(resume_token)
        log = self._logs.get((flow_type, stream, flow_id))
        if log is None:
            return None
        index = first_index_after(log.messages, after)
        return None if index is None else log.messages[index].to_proto()

    async def read(
        self,
        flow_type: str,
        stream: str,
        flow_id: str,
        resume_token: str,
        wait_seconds: float,
    ) -> pb.StreamMessage | None:
        """Long-poll for the first message after a resume token."""
        deadline = asyncio.get_running_loop().time() + wait_seconds
        while True:
            found = self.first_after(flow_type, stream, flow_id, resume_token)
            if found is not None:
                return found
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return None
            changed = self._log(flow_type, stream, flow_id).changed
            try:
                async with asyncio.timeout(remaining):  # no Task per wait, as wait_for makes
                    await changed.wait()
            except TimeoutError:
                return None

    def page(
        self, flow_type: str, stream: str, flow_id: str, page_size: int, before_token: str
    ) -> tuple[list[pb.StreamMessage], str]:
        """A newest-first page of messages before a page token, and the next token."""
        before = parse_token(before_token) if before_token else None
        log = self._logs.get((flow_type, stream, flow_id))
        if log is None:
            return [], ""
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        # Walks back from the newest message, so the first page (a follower catching up,
        # the newest token) costs the page, not the whole retained log.
        messages = log.messages
        end = len(messages)  # the messages before the page token: messages[:end]
        if before is not None:
            first_at_or_after = first_index_after(messages, before - 1)
            end = end if first_at_or_after is None else first_at_or_after
        skip = len(messages) - end
        chosen = list(itertools.islice(reversed(messages), skip, skip + size))
        next_token = str(chosen[-1].seq) if chosen and end > len(chosen) else ""
        return [m.to_proto() for m in chosen], next_token


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


def first_index_after(messages: Sequence[_Sequenced], after: int) -> int | None:
    """The index of the first message with a sequence number above ``after``, if any.

    Sequence numbers rise along the log. A reader that follows a Stream asks for the
    newest message or the one after it, so the search starts at the ends and walks
    back only over the messages newer than the token: a long-lived log costs a
    follower nothing per read.
    """
    if not messages or messages[-1].seq <= after:
        return None
    if messages[0].seq > after:
        return 0
    index = len(messages) - 1
    while messages[index - 1].seq > after:
        index -= 1
    return index


def parse_token(token: str) -> int:
    """The sequence number a resume or page token names."""
    if not token:
        return 0
    try:
        value = int(token)
    except ValueError:
        raise ValueError(f"malformed stream token {token!r}") from None
    if value < 0:
        raise ValueError(f"malformed stream token {token!r}")
    return value
