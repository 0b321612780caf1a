"""dex_agents.testing.script_playback: the part every adapter's scripted model shares."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dex_agents.testing import FileGate, ModelScript, ModelTurn, ToolCallSpec
from dex_agents.testing.script_playback import (
    play_scripted_model_call,
    scripted_tool_call_id,
    scripted_turn_number,
)
from dex_agents.testing.scripted_runner import ScriptedModelFailure

SCRIPT = ModelScript(
    [
        ModelTurn(tool_calls=[ToolCallSpec("lookup", {}), ToolCallSpec("x", {}, "mine")]),
        ModelTurn(text="done", fail_attempts=1),
        ModelTurn(text="second turn", gate="slow", text_before_gate="working..."),
    ]
)


async def test_the_response_for_the_turn_and_position(tmp_path: Path) -> None:
    written: list[str] = []
    first = await play_scripted_model_call(
        SCRIPT, tmp_path, turn_id="turn-1", position=0, attempt=1, write_text=written.append
    )
    assert [scripted_tool_call_id(s, 0, i) for i, s in enumerate(first.tool_calls)] == [
        "call-0-0",
        "mine",
    ]
    assert written == []


async def test_a_scripted_failure_on_its_attempts_only(tmp_path: Path) -> None:
    with pytest.raises(ScriptedModelFailure, match="model call 2 of turn-1 failed on attempt 1"):
        await play_scripted_model_call(
            SCRIPT, tmp_path, turn_id="turn-1", position=1, attempt=1, write_text=print
        )
    second = await play_scripted_model_call(
        SCRIPT, tmp_path, turn_id="turn-1", position=1, attempt=2, write_text=print
    )
    assert second.text == "done"


async def test_text_before_the_gate_then_the_gate(tmp_path: Path) -> None:
    written: list[str] = []

    async def write(text: str) -> None:
        written.append(text)

    call = asyncio.create_task(
        play_scripted_model_call(
            SCRIPT, tmp_path, turn_id="turn-2", position=0, attempt=1, write_text=write
        )
    )
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
