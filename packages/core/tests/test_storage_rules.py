"""Pure rules of message storage: rollover, oversized messages, bounds, retention, reads."""

from __future__ import annotations

import pytest

from dex_agents._storage import (
    MessageStorageSettings,
    apply_retention,
    assemble_messages,
    chunk_keys_after,
    deleted_before_sequence,
    message_json_bytes,
    plan_message_storage,
)
from dex_agents.values import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    ContextSummary,
    to_wire_json,
)


def message(sequence: int, text: str = "hi") -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role="user", framework_item=text, text=text
    )


def plan(window: list[AgentMessage], appended: list[AgentMessage], **kwargs):
    stored = {m.sequence: m for m in window}
    settings = kwargs.pop("settings", MessageStorageSettings(window_size=4, chunk_size=2))
    return plan_message_storage(
        index=kwargs.pop("index", None),
        window_keys=sorted(stored),
        load_window_message=stored.__getitem__,
        appended=appended,
        message_count=appended[-1].sequence if appended else kwargs.pop("message_count"),
        summary=kwargs.pop("summary", None),
        settings=settings,
    )


def test_window_below_its_size_writes_only_the_new_message_and_no_index() -> None:
    result = plan([message(1), message(2)], [message(3)])
    assert [m.sequence for m in result.window_writes] == [3]
    assert result.window_deletes == []
    assert result.chunk_writes == {}
    assert result.index is None


def test_append_past_the_window_moves_the_oldest_chunk_in_the_same_commit() -> None:
    result = plan([message(i) for i in range(1, 5)], [message(5)])
    assert list(result.chunk_writes) == ["000000000001"]
    assert [m.sequence for m in result.chunk_writes["000000000001"].messages] == [1, 2]
    assert result.window_deletes == ["000000000001", "000000000002"]
    assert result.index == AgentMessageIndex(
        chunks=(AgentMessageChunkRange(1, 2),), first_sequence=1, window_first_sequence=3
    )


def test_an_old_session_backlog_moves_at_most_four_chunks_per_commit() -> None:
    backlog = [message(i) for i in range(1, 30)]
    result = plan(backlog, [message(30)])
    assert len(result.chunk_writes) == 4
    assert result.index is not None
    assert result.index.window_first_sequence == 9
    # The next append drains more.
    rest = [m for m in backlog if m.sequence >= 9] + [message(30)]
    again = plan(rest, [message(31)], index=result.index)
    assert again.index is not None
    assert again.index.window_first_sequence == 17


def test_rollover_bytes_per_commit_are_bounded() -> None:
    big = "x" * 900_000  # about 1.8 MB of JSON: framework_item and text
    settings = MessageStorageSettings(window_size=2, chunk_size=2, chunk_max_bytes=4 * 1024 * 1024)
    backlog = [message(i, big) for i in range(1, 12)]
    result = plan(backlog, [message(12, big)], settings=settings)
    moved = sum(len(to_wire_json(chunk)) for chunk in result.chunk_writes.values())
    # Two chunks of two (7.2 MB); a third would pass 8 MiB.
    assert len(result.chunk_writes) == 2
    assert moved <= 8 * 1024 * 1024


def test_an_oversized_message_goes_straight_into_its_own_chunk() -> None:
    settings = MessageStorageSettings(window_size=4, chunk_size=2, chunk_max_bytes=400)
    large = message(3, "y" * 400)
    result = plan([message(1), message(2)], [large, message(4)], settings=settings)
    assert list(result.chunk_writes) == ["000000000003"]
    assert [m.sequence for m in result.window_writes] == [4]
    assert result.index is not None
    assert result.index.chunks == (AgentMessageChunkRange(3, 3),)
    assert result.index.window_first_sequence == 1
    # A later rollover closes its chunk before the oversized message and skips it.
    window = [message(1), message(2), message(4), message(5)]
    later = plan(window, [message(6)], index=result.index, settings=settings)
    assert later.index is not None
    assert [(c.first_sequence, c.last_sequence) for c in later.index.chunks] == [(1, 2), (3, 3)]
    assert later.index.window_first_sequence == 4


def test_chunks_close_at_their_byte_limit() -> None:
    one = message_json_bytes(message(1, "z" * 100))
    settings = MessageStorageSettings(window_size=4, chunk_size=4, chunk_max_bytes=2 * one + 20)
    window = [message(i, "z" * 100) for i in range(1, 5)]
    result = plan(window, [message(5, "z" * 100)], settings=settings)
    assert [len(chunk.messages) for chunk in result.chunk_writes.values()] == [2]


def test_retention_deletes_only_summarized_chunks_followed_by_enough_messages() -> None:
    index = AgentMessageIndex(
        chunks=(AgentMessageChunkRange(1, 2), AgentMessageChunkRange(3, 4)),
        first_sequence=1,
        window_first_sequence=5,
    )
    kept, deleted = apply_retention(
        index, message_count=10, summary_last_sequence=None, retained_message_limit=2
    )
    assert deleted == []
    assert kept == index
    kept, deleted = apply_retention(
        index, message_count=10, summary_last_sequence=3, retained_message_limit=2
    )
    assert deleted == ["000000000001"]
    assert kept.first_sequence == 3
    assert kept.chunks == (AgentMessageChunkRange(3, 4),)
    kept, deleted = apply_retention(
        index, message_count=10, summary_last_sequence=9, retained_message_limit=7
    )
    assert deleted == ["000000000001"]  # 6 messages after chunk 3..4 are fewer than 7
    _, deleted = apply_retention(
        index, message_count=10, summary_last_sequence=9, retained_message_limit=None
    )
    assert deleted == []


def test_append_applies_retention_and_pages_report_the_deleted_start() -> None:
    index = AgentMessageIndex(
        chunks=(AgentMessageChunkRange(1, 2),), first_sequence=1, window_first_sequence=3
    )
    settings = MessageStorageSettings(window_size=4, chunk_size=2, retained_message_limit=1)
    result = plan(
        [message(3), message(4)],
        [message(5)],
        index=index,
        summary=ContextSummary(generation=1, last_sequence=2, summary="s"),
        settings=settings,
    )
    assert result.chunk_deletes == ["000000000001"]
    assert result.index is not None
    assert result.index.first_sequence == 3
    assert deleted_before_sequence(result.index) == 3
    assert deleted_before_sequence(None) is None


def test_readers_handle_a_half_moved_session_and_read_after_the_summary() -> None:
    index = AgentMessageIndex(
        chunks=(AgentMessageChunkRange(3, 4), AgentMessageChunkRange(5, 6)),
        first_sequence=3,
        window_first_sequence=7,
    )
    chunks = {
        "000000000003": AgentMessageChunk(messages=(message(3), message(4))),
        "000000000005": AgentMessageChunk(messages=(message(5), message(6))),
    }
    # The window still holds a message that a chunk holds too, and one deleted.
    window = [message(1), message(6), message(7), message(8)]
    assert [m.sequence for m in assemble_messages(index, window, chunks)] == [3, 4, 5, 6, 7, 8]
    after = assemble_messages(index, window, chunks, after_sequence=5)
    assert [m.sequence for m in after] == [6, 7, 8]
    assert chunk_keys_after(index, 5) == ["000000000005"]
    assert chunk_keys_after(index, None) == ["000000000003", "000000000005"]
    # No index: everything is in the window (a new session, or an older Worker's).
    assert [m.sequence for m in assemble_messages(None, window[:1], {})] == [1]


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="at least message_chunk_size"):
        MessageStorageSettings(window_size=2, chunk_size=4)
    with pytest.raises(ValueError, match="at most 8388608"):
        MessageStorageSettings(chunk_max_bytes=8 * 1024 * 1024 + 1)
    with pytest.raises(ValueError, match="retained_message_limit"):
        MessageStorageSettings(retained_message_limit=-1)


def test_messages_out_of_order_or_twice_read_the_same_as_ordered_ones() -> None:
    chunks = {
        "000000000003": AgentMessageChunk(messages=(message(3), message(4))),
        "000000000001": AgentMessageChunk(messages=(message(1), message(2))),
    }
    ordered = assemble_messages(None, [message(5), message(6)], chunks)
    assert [m.sequence for m in ordered] == [1, 2, 3, 4, 5, 6]
    # A window given out of order, and a message both in a chunk and the window.
    shuffled = assemble_messages(None, [message(6), message(4), message(5)], chunks)
    assert [m.sequence for m in shuffled] == [1, 2, 3, 4, 5, 6]
    assert shuffled[3] is chunks["000000000003"].messages[1]
