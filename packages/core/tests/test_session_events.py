"""The event writer: delta coalescing, the fields of every event, and closing; no engine."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from dex_agents.session._events import (
    DELTA_FLUSH_CHARACTERS,
    DELTA_FLUSH_SECONDS,
    DeltaBuffer,
    SessionEventWriter,
)
from dex_agents.values import AgentEvent, AgentToolCallStatus


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


# --- the writer of one Step attempt, over a stand-in Stream -------------------------------


@dataclass
class _Context:
    attempt: int = 2
    step_execution_id: str = "RunModel-3"


@dataclass
class _Stream:
    written: list[AgentEvent] = field(default_factory=lambda: list[AgentEvent]())

    def write(self, context: Any, event: AgentEvent) -> None:
        self.written.append(event)

    def payloads(self) -> list[tuple[str, Any]]:
        return [(event.type, json.loads(event.payload)) for event in self.written]


def _writer() -> tuple[SessionEventWriter, _Stream]:
    stream = _Stream()
    return SessionEventWriter(_Context(), stream, turn_id="turn-4"), stream  # type: ignore[arg-type]


async def test_every_event_carries_turn_attempt_and_step_execution() -> None:
    writer, stream = _writer()
    writer.write_tool_call_started("c1", "lookup")
    writer.write_tool_call_finished("c1", "lookup", AgentToolCallStatus.SUCCEEDED)
    writer.write_event("vendor.step", {"n": 1})
    assert stream.payloads() == [
        ("tool_call_started", {"tool_call_id": "c1", "tool_name": "lookup"}),
        (
            "tool_call_finished",
            {"tool_call_id": "c1", "tool_name": "lookup", "status": "succeeded"},
        ),
        ("vendor.step", {"n": 1}),
    ]
    assert {(e.turn_id, e.attempt, e.step_execution_id) for e in stream.written} == {
        ("turn-4", 2, "RunModel-3")
    }


async def test_deltas_wait_for_the_flush_interval_then_merge() -> None:
    writer, stream = _writer()
    writer.write_text_delta("Hel")
    writer.write_text_delta("lo")
    assert stream.written == []
    # Deadline-free: wait until the writer's own timer has had time to fire.
    for _ in range(100):
        await asyncio.sleep(DELTA_FLUSH_SECONDS)
        if stream.written:
            break
    assert stream.payloads() == [("text_delta", {"text": "Hello"})]


async def test_another_event_flushes_the_buffered_deltas_first() -> None:
    writer, stream = _writer()
    writer.write_reasoning_delta("think")
    writer.write_event("text_delta", {"text": "a"})  # a delta written as an event still merges
    writer.write_text_delta("b")
    writer.write_tool_call_started("c1", "lookup")
    assert [t for t, _ in stream.payloads()] == [
        "reasoning_delta",
        "text_delta",
        "tool_call_started",
    ]
    assert stream.payloads()[1] == ("text_delta", {"text": "ab"})


async def test_close_writes_what_is_buffered_and_drops_later_writes() -> None:
    writer, stream = _writer()
    writer.write_text_delta("last words")
    writer.close()
    writer.write_text_delta("too late")
    writer.write_event("turn_failed", {"error": "late"})
    await asyncio.sleep(DELTA_FLUSH_SECONDS * 2)
    assert stream.payloads() == [("text_delta", {"text": "last words"})]


async def test_a_payload_that_is_not_json_is_dropped_and_a_blank_type_refused() -> None:
    writer, stream = _writer()
    writer.write_event("vendor.bad", {"value": object()})
    assert stream.written == []
    with pytest.raises(ValueError, match="event type"):
        writer.write_event("", {})


async def test_writes_from_another_thread_reach_the_step_loop() -> None:
    writer, stream = _writer()
    thread = threading.Thread(target=lambda: writer.write_tool_call_started("c2", "t"))
    thread.start()
    thread.join()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if stream.written:
            break
    assert stream.payloads() == [("tool_call_started", {"tool_call_id": "c2", "tool_name": "t"})]
