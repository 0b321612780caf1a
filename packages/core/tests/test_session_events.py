"""The event writer's delta coalescing, without an engine."""

from __future__ import annotations

from dex_agents.session.events import DELTA_FLUSH_CHARACTERS, DeltaBuffer


def test_consecutive_deltas_of_one_type_merge() -> None:
    buffer = DeltaBuffer()
    assert buffer.add("text_delta", "Hel") == []
    assert buffer.add("text_delta", "lo") == []
    assert buffer.drain() == [("text_delta", "Hello")]
    assert buffer.is_empty


def test_a_new_type_flushes_the_previous_one() -> None:
    buffer = DeltaBuffer()
    buffer.add("reasoning_delta", "think")
    assert buffer.add("text_delta", "say") == [("reasoning_delta", "think")]
    assert buffer.drain() == [("text_delta", "say")]


def test_the_character_limit_flushes_at_once() -> None:
    buffer = DeltaBuffer()
    buffer.add("text_delta", "a" * (DELTA_FLUSH_CHARACTERS - 1))
    flushed = buffer.add("text_delta", "bc")
    assert flushed == [("text_delta", "a" * (DELTA_FLUSH_CHARACTERS - 1) + "bc")]
    assert buffer.is_empty
    assert buffer.drain() == []
