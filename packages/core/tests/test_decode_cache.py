"""Stored texts decode once per process: the cache and the session codecs that use it."""

from __future__ import annotations

import pytest
from dex import Value, WireKind

from dex_agents import AgentMessage, session_codec_registry
from dex_agents.runner import DecodeCache
from dex_agents.values import (
    SESSION_VALUE_DECODE_CACHE,
    STORED_MESSAGE_DECODE_CACHE,
    AgentInterrupt,
    AgentMessageChunk,
    AgentState,
    AgentToolCall,
)


def test_a_text_decodes_once_and_another_text_decodes_again() -> None:
    cache: DecodeCache[list[str]] = DecodeCache(max_characters=100)
    decoded: list[str] = []

    def decode(text: str) -> list[str]:
        decoded.append(text)
        return [text]

    first = cache.get_or_decode("abc", decode)
    assert cache.get_or_decode("abc", decode) is first
    assert cache.get_or_decode("abd", decode) == ["abd"]
    assert decoded == ["abc", "abd"]
    assert (cache.hits, cache.misses) == (1, 2)


def test_the_least_recently_used_texts_leave_once_the_budget_is_spent() -> None:
    cache: DecodeCache[str] = DecodeCache(max_characters=10)
    for text in ("aaaa", "bbbb"):
        cache.get_or_decode(text, str.upper)
    cache.get_or_decode("aaaa", str.upper)  # used again: "bbbb" is now the oldest
    cache.get_or_decode("cccc", str.upper)
    assert len(cache) == 2
    decoded: list[str] = []
    cache.get_or_decode("aaaa", lambda text: decoded.append(text) or text)
    cache.get_or_decode("bbbb", lambda text: decoded.append(text) or text)
    assert decoded == ["bbbb"]


def test_a_text_larger_than_the_budget_or_a_failing_decode_is_not_kept() -> None:
    cache: DecodeCache[str] = DecodeCache(max_characters=3)
    assert cache.get_or_decode("toolong", str.upper) == "TOOLONG"
    assert len(cache) == 0

    def fail(text: str) -> str:
        raise ValueError(f"bad {text}")

    for _ in range(2):
        with pytest.raises(ValueError, match="bad x"):
            cache.get_or_decode("x", fail)
    assert len(cache) == 0
    with pytest.raises(ValueError, match="must not be negative"):
        DecodeCache(max_characters=-1)


def test_session_codecs_decode_a_stored_message_or_chunk_text_once() -> None:
    registry = session_codec_registry()
    message = AgentMessage(
        sequence=7, turn_id="turn-2", role="user", framework_item="{}", text="hi"
    )
    for value_type, value in (
        (AgentMessage, message),
        (AgentMessageChunk, AgentMessageChunk(messages=(message,))),
    ):
        codec = registry.resolve(value_type)
        encoded = codec.encode(value)
        STORED_MESSAGE_DECODE_CACHE.clear()
        hits = STORED_MESSAGE_DECODE_CACHE.hits
        first = codec.decode(encoded)
        # A fresh Value with equal text, as a later Step receives it, gives the same object.
        again = codec.decode(Value(WireKind.JSON, str(encoded.data)))
        assert first == value
        assert again is first
        assert STORED_MESSAGE_DECODE_CACHE.hits == hits + 1
    other = registry.resolve(AgentMessage).encode(
        AgentMessage(sequence=8, turn_id="turn-2", role="user", framework_item="{}", text="yo")
    )
    assert registry.resolve(AgentMessage).decode(other).text == "yo"
    with pytest.raises(TypeError):
        registry.resolve(AgentMessage).decode(Value(WireKind.STRING, "{}"))


def test_session_values_a_step_reads_decode_once_and_what_this_process_wrote_not_at_all() -> None:
    registry = session_codec_registry()
    state = AgentState(turn_count=3, message_count=9)
    record_codec = registry.resolve(AgentToolCall)
    codec = registry.resolve(AgentState)
    encoded = codec.encode(state)
    # The next Step receives the text this process just wrote: the written object itself.
    assert codec.decode(Value(WireKind.JSON, str(encoded.data))) is state
    SESSION_VALUE_DECODE_CACHE.clear()
    first = codec.decode(Value(WireKind.JSON, str(encoded.data)))
    assert first == state
    assert first is not state
    assert codec.decode(Value(WireKind.JSON, str(encoded.data))) is first
    # Another value type with its own text never meets this one.
    with pytest.raises(TypeError):
        record_codec.decode(Value(WireKind.JSON, str(encoded.data)))
    interrupts = registry.resolve(tuple[AgentInterrupt, ...])
    assert interrupts.decode(interrupts.encode(())) == ()
