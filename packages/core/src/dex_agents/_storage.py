"""Pure rules of message storage: the window, archive chunks, the index and retention.

A session keeps its newest messages in the ``AgentMessages`` window, one instance
per message, and moves older ones into immutable ``AgentMessageChunks`` instances
in the same commit that takes the window past its size. ``AgentMessageIndex``
says where every kept message lives; a session without one (new, or written by an
older Worker) keeps every message in the window. Nothing here touches Dex: the
functions take committed values and return what to write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dex_agents._values import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    ContextSummary,
    message_sequence_key,
    to_wire_json,
)

__all__ = [
    "CHUNK_JSON_OVERHEAD_BYTES",
    "DEFAULT_MESSAGE_CHUNK_MAX_BYTES",
    "DEFAULT_MESSAGE_CHUNK_SIZE",
    "DEFAULT_MESSAGE_WINDOW_SIZE",
    "DEFAULT_RETAINED_MESSAGE_LIMIT",
    "MAX_MESSAGE_CHUNK_MAX_BYTES",
    "MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT",
    "MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT",
    "NO_INDEX",
    "MessageStorageSettings",
    "StoragePlan",
    "apply_retention",
    "assemble_messages",
    "chunk_keys_after",
    "deleted_before_sequence",
    "message_json_bytes",
    "plan_message_storage",
]

DEFAULT_MESSAGE_WINDOW_SIZE = 64
DEFAULT_MESSAGE_CHUNK_SIZE = 32
DEFAULT_MESSAGE_CHUNK_MAX_BYTES = 1024 * 1024
MAX_MESSAGE_CHUNK_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_RETAINED_MESSAGE_LIMIT = 1000
MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT = 4
MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT = 8 * 1024 * 1024
CHUNK_JSON_OVERHEAD_BYTES = len('{"messages":[]}')
"""Bytes a chunk's JSON adds around its messages (15)."""


@dataclass(frozen=True, kw_only=True)
class MessageStorageSettings:
    """The session's storage bounds; see ``AgentSessionOptions``."""

    window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT

    def __post_init__(self) -> None:
        for name in ("window_size", "chunk_size", "chunk_max_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"message_{name} must be a positive integer, got {value!r}")
        if self.window_size < self.chunk_size:
            raise ValueError(
                "message_window_size must be at least message_chunk_size "
                f"({self.window_size} < {self.chunk_size})"
            )
        if self.chunk_max_bytes > MAX_MESSAGE_CHUNK_MAX_BYTES:
            raise ValueError(
                f"message_chunk_max_bytes must be at most {MAX_MESSAGE_CHUNK_MAX_BYTES}, "
                f"got {self.chunk_max_bytes}"
            )
        limit = self.retained_message_limit
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValueError("retained_message_limit must be a non-negative integer or None")


@dataclass
class StoragePlan:
    """What one commit writes to store messages: window and chunk instances, the index."""

    window_writes: list[AgentMessage] = field(default_factory=lambda: list[AgentMessage]())
    window_deletes: list[str] = field(default_factory=lambda: list[str]())
    chunk_writes: dict[str, AgentMessageChunk] = field(
        default_factory=lambda: dict[str, AgentMessageChunk]()
    )
    chunk_deletes: list[str] = field(default_factory=lambda: list[str]())
    index: AgentMessageIndex | None = None
    """The new index, or ``None`` when it did not change."""


def message_json_bytes(message: AgentMessage) -> int:
    """Bytes of ``message`` in the JSON this core writes (ASCII-escaped, so one per char)."""
    return len(to_wire_json(message))


NO_INDEX = AgentMessageIndex(chunks=(), first_sequence=1, window_first_sequence=1)
"""How a session without an index reads: nothing deleted, every message in the window."""


def plan_message_storage(
    *,
    index: AgentMessageIndex | None,
    window_keys: Sequence[int],
    load_window_message: Callable[[int], AgentMessage],
    appended: Sequence[AgentMessage],
    message_count: int,
    summary: ContextSummary | None,
    settings: MessageStorageSettings,
) -> StoragePlan:
    """Store ``appended`` and roll the window over, within one commit's bounds.

    ``window_keys`` are the sequences in the ``AgentMessages`` window before this
    commit, and ``load_window_message`` decodes one, so only moved messages are
    decoded. ``message_count`` is the last sequence after the commit. An oversized
    message (its chunk of one would pass ``chunk_max_bytes``) goes straight into its
    own chunk. While the window holds more than ``window_size`` messages, its oldest
    move into chunks of at most ``chunk_size`` messages and ``chunk_max_bytes`` bytes,
    at most 4 chunks and 8 MiB per commit. Retention then deletes the oldest chunks
    it may.
    """
    plan = StoragePlan()
    current = index if index is not None else NO_INDEX
    chunks = list(current.chunks)
    changed = False
    loaded: dict[int, AgentMessage] = {}
    in_window: set[int] = set(window_keys)
    for message in appended:
        size = message_json_bytes(message)
        if size + CHUNK_JSON_OVERHEAD_BYTES > settings.chunk_max_bytes:
            key = message_sequence_key(message.sequence)
            plan.chunk_writes[key] = AgentMessageChunk(messages=(message,))
            chunks.append(AgentMessageChunkRange(message.sequence, message.sequence))
            changed = True
        else:
            in_window.add(message.sequence)
            loaded[message.sequence] = message
            plan.window_writes.append(message)

    def window_message(sequence: int) -> AgentMessage:
        message = loaded.get(sequence)
        return message if message is not None else load_window_message(sequence)

    window_first = current.window_first_sequence
    new_sequences = {message.sequence for message in plan.window_writes}
    own_chunks = {chunk.first_sequence for chunk in chunks if chunk.first_sequence >= window_first}
    ordered = sorted(in_window)
    summary_last_sequence = summary.last_sequence if summary is not None else None
    moved_chunks = 0
    moved_bytes = 0
    position = 0
    while len(ordered) - position > settings.window_size:
        if moved_chunks >= MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT:
            break
        # A chunk holds consecutive sequences: it closes before an oversized message.
        batch: list[AgentMessage] = []
        batch_bytes = CHUNK_JSON_OVERHEAD_BYTES
        expected = ordered[position]
        while position < len(ordered) and len(batch) < settings.chunk_size:
            sequence = ordered[position]
            if sequence != expected:
                break
            message = window_message(sequence)
            size = message_json_bytes(message) + (1 if batch else 0)
            if batch and batch_bytes + size > settings.chunk_max_bytes:
                break
            batch.append(message)
            batch_bytes += size
            position += 1
            expected = sequence + 1
        if moved_chunks > 0 and moved_bytes + batch_bytes > MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT:
            position -= len(batch)
            break
        first, last = batch[0].sequence, batch[-1].sequence
        plan.chunk_writes[message_sequence_key(first)] = AgentMessageChunk(messages=tuple(batch))
        chunks.append(AgentMessageChunkRange(first, last))
        # A message stored and moved in this commit is never written to the window.
        moved = {message.sequence for message in batch}
        plan.window_deletes.extend(
            message_sequence_key(sequence) for sequence in sorted(moved - new_sequences)
        )
        plan.window_writes = [m for m in plan.window_writes if m.sequence not in moved]
        moved_chunks += 1
        moved_bytes += batch_bytes
        changed = True
    if position > 0:
        # The window starts after the last moved message and any oversized chunks right after it.
        window_first = ordered[position - 1] + 1
        while window_first in own_chunks:
            window_first += 1
    chunks.sort(key=lambda chunk: chunk.first_sequence)
    updated = AgentMessageIndex(
        chunks=tuple(chunks),
        first_sequence=current.first_sequence,
        window_first_sequence=window_first,
    )
    updated, deleted = apply_retention(
        updated,
        message_count=message_count,
        summary_last_sequence=summary_last_sequence,
        retained_message_limit=settings.retained_message_limit,
    )
    for key in deleted:
        plan.chunk_writes.pop(key, None)
        plan.chunk_deletes.append(key)
    if changed or deleted:
        plan.index = updated
    return plan


def apply_retention(
    index: AgentMessageIndex,
    *,
    message_count: int,
    summary_last_sequence: int | None,
    retained_message_limit: int | None,
) -> tuple[AgentMessageIndex, list[str]]:
    """Delete the oldest chunks that are wholly summarized and followed by enough messages.

    A chunk goes only while every message in it is at or before the summary and at
    least ``retained_message_limit`` stored messages come after it, so the newest
    messages and everything after the summary always stay.
    """
    if retained_message_limit is None or summary_last_sequence is None:
        return index, []
    chunks = list(index.chunks)
    deleted: list[str] = []
    first_sequence = index.first_sequence
    while chunks:
        oldest = chunks[0]
        if oldest.last_sequence >= index.window_first_sequence:
            break  # an oversized message among the window's: older window messages stay
        if oldest.last_sequence > summary_last_sequence:
            break
        if message_count - oldest.last_sequence < retained_message_limit:
            break
        chunks.pop(0)
        deleted.append(message_sequence_key(oldest.first_sequence))
        first_sequence = oldest.last_sequence + 1
    if not deleted:
        return index, []
    return (
        AgentMessageIndex(
            chunks=tuple(chunks),
            first_sequence=first_sequence,
            window_first_sequence=index.window_first_sequence,
        ),
        deleted,
    )


def chunk_keys_after(index: AgentMessageIndex | None, after_sequence: int | None) -> list[str]:
    """Keys of the kept chunks that hold a message after ``after_sequence`` (all for None)."""
    if index is None:
        return []
    floor = 0 if after_sequence is None else after_sequence
    return [
        message_sequence_key(chunk.first_sequence)
        for chunk in index.chunks
        if chunk.last_sequence > floor
    ]


def assemble_messages(
    index: AgentMessageIndex | None,
    window: Iterable[AgentMessage],
    chunks: Mapping[str, AgentMessageChunk],
    *,
    after_sequence: int | None = None,
) -> list[AgentMessage]:
    """The stored messages after ``after_sequence``, in order, from the window and chunks.

    Reads a half-moved session too: a message found both in a chunk and the window
    counts once, and messages before ``index.first_sequence`` (deleted) never appear.
    """
    floor = 0 if after_sequence is None else after_sequence
    if index is not None:
        floor = max(floor, index.first_sequence - 1)
    # The usual case, chunks in order and then the window, with nothing twice: concatenated
    # without a lookup per message (a model Step reads the whole conversation).
    ordered = [
        message
        for key in sorted(chunks)
        for message in chunks[key].messages
        if message.sequence > floor
    ]
    ordered.extend(message for message in window if message.sequence > floor)
    sequences = [message.sequence for message in ordered]
    if sequences == sorted(set(sequences)):
        return ordered
    by_sequence: dict[int, AgentMessage] = {}
    for chunk in chunks.values():
        for message in chunk.messages:
            if message.sequence > floor:
                by_sequence[message.sequence] = message
    for message in window:
        if message.sequence > floor:
            by_sequence.setdefault(message.sequence, message)
    return [by_sequence[sequence] for sequence in sorted(by_sequence)]


def deleted_before_sequence(index: AgentMessageIndex | None) -> int | None:
    """The oldest stored sequence once retention deleted earlier messages, else ``None``."""
    if index is None or index.first_sequence <= 1:
        return None
    return index.first_sequence
