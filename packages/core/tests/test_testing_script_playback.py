"""dex_agents.testing._script_playback: the part every adapter's scripted model shares."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from dex_agents.testing import (
    MODEL_CALLS_LOG,
    FileGate,
    InvocationLog,
    ModelScript,
    ModelTurn,
    ScriptedModelFailure,
    TextWriter,
    ToolCallSpec,
    play_scripted_model_call,
    scripted_answer_text,
    scripted_tool_call_id,
    scripted_turn_number,
)

SCRIPT = ModelScript(
    [
        ModelTurn(tool_calls=[ToolCallSpec("lookup", {}), ToolCallSpec("x", {}, "mine")]),
        ModelTurn(text="done", fail_attempts=1),
        ModelTurn(text="second turn", gate="slow", text_before_gate="working..."),
    ]
)


def play(
    state_directory: Path, turn_id: str, *, position: int, attempt: int, write_text: TextWriter
) -> Coroutine[Any, Any, ModelTurn]:
    """A call of SCRIPT that read nothing."""
    return play_scripted_model_call(
        SCRIPT,
        state_directory,
        turn_id=turn_id,
        position=position,
        attempt=attempt,
        history=[],
        tool_results={},
        write_text=write_text,
    )


async def test_the_response_for_the_turn_and_position(tmp_path: Path) -> None:
    written: list[str] = []
    first = await play(tmp_path, "turn-1", position=0, attempt=1, write_text=written.append)
    assert [scripted_tool_call_id(s, 0, i) for i, s in enumerate(first.tool_calls)] == [
        "call-0-0",
        "mine",
    ]
    assert written == []


async def test_a_scripted_failure_on_its_attempts_only(tmp_path: Path) -> None:
    with pytest.raises(ScriptedModelFailure, match="model call 2 of turn-1 failed on attempt 1"):
        await play(tmp_path, "turn-1", position=1, attempt=1, write_text=print)
    second = await play(tmp_path, "turn-1", position=1, attempt=2, write_text=print)
    assert second.text == "done"


async def test_each_call_is_recorded_before_it_answers_or_fails(tmp_path: Path) -> None:
    with pytest.raises(ScriptedModelFailure):
        await play_scripted_model_call(
            SCRIPT,
            tmp_path,
            turn_id="turn-1",
            position=1,
            attempt=1,
            history=["user: hi", "assistant:  -> lookup"],
            tool_results={"call-0-0": "found"},
            write_text=print,
        )
    [call] = InvocationLog(tmp_path / MODEL_CALLS_LOG).invocations()
    assert call.tool_name == "model"
    assert call.details == {
        "turn_id": "turn-1",
        "position": 1,
        "attempt": 1,
        "history": ["user: hi", "assistant:  -> lookup"],
        "tool_results": {"call-0-0": "found"},
    }


async def test_text_before_the_gate_then_the_gate(tmp_path: Path) -> None:
    written: list[str] = []

    async def write(text: str) -> None:
        written.append(text)

    call = asyncio.create_task(play(tmp_path, "turn-2", position=0, attempt=1, write_text=write))
    gate = FileGate(tmp_path, "slow")
    await gate.wait_until_reached()
    assert written == ["working..."]
    assert not call.done()
    gate.release()
    assert (await call).text == "second turn"


def test_turn_ids_are_checked() -> None:
    assert scripted_turn_number("turn-12") == 12
    for bad in ("turn-", "round-1", "turn-x"):
        with pytest.raises(ValueError, match="expected turn-<n>"):
            scripted_turn_number(bad)


def test_the_answer_text_is_the_scripted_text_or_the_turn_tool_results() -> None:
    def unread() -> list[tuple[str, str]]:
        raise AssertionError("results are read only for text_from_tool_results")

    assert scripted_answer_text(ModelTurn(text="done"), unread) == "done"
    assert scripted_answer_text(ModelTurn(), unread) == ""
    from_results = ModelTurn(text_from_tool_results=True)
    results = [("lookup", "order 42 shipped"), ("charge", "charged 5")]
    assert (
        scripted_answer_text(from_results, lambda: results)
        == "lookup: order 42 shipped\ncharge: charged 5"
    )
    assert scripted_answer_text(from_results, list) == "(no tool results)"


async def test_misused_helpers_say_what_they_take(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"write_text=.*write_text_delta"):
        await play(tmp_path, "turn-1", position=0, attempt=1, write_text="text")  # type: ignore[arg-type]
    assert not (tmp_path / MODEL_CALLS_LOG).exists()
    with pytest.raises(TypeError, match="function that returns"):
        scripted_answer_text(ModelTurn(text_from_tool_results=True), [("lookup", "ok")])  # type: ignore[arg-type]
