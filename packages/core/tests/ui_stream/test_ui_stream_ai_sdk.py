"""The real AI SDK chat client (`ai` from npm, under node) against the Python server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from browser_tools import install_ai_package
from ui_support import new_session_id, serve_ui_session

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def ai_package() -> Path:
    directory, reason = install_ai_package()
    if directory is None:
        pytest.skip(reason)
    shutil.copy(HERE / "ai_chat_client.mjs", directory / "ai_chat_client.mjs")
    return directory


async def test_the_ai_sdk_chat_streams_approves_and_resumes_after_a_drop(
    engine, ai_package: Path
) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid)
        # The fourth POST (hello, charge, the approval answer, then "slow") is cut after
        # its first text delta and token.
        server.cut.arm_after_requests("POST", "/api/chat", chunks=8, skip=3)
        node = await asyncio.create_subprocess_exec(
            "node",
            "ai_chat_client.mjs",
            server.base_url,
            sid,
            cwd=ai_package,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        communicate = asyncio.ensure_future(node.communicate())
        cut_or_exit = await asyncio.wait(
            {communicate, asyncio.ensure_future(server.cut.cut.wait())},
            return_when=asyncio.FIRST_COMPLETED,
        )
        del cut_or_exit
        server.runner.release.set()  # the turn goes on after the drop
        stdout, stderr = await asyncio.wait_for(communicate, 120)
        assert node.returncode == 0, stderr.decode()
        report = json.loads(stdout.decode().strip().splitlines()[-1])

    messages = report["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3
    assert [m["id"] for m in messages[1::2]] == [
        "turn-1-assistant",
        "turn-2-assistant",
        "turn-3-assistant",
    ]

    def texts(message: dict) -> list[str]:
        return [p["text"] for p in message["parts"] if p["type"] == "text"]

    assert texts(messages[1]) == ["Hello there"]
    approved = messages[3]
    tools = {p["toolCallId"]: p for p in approved["parts"] if p["type"] == "dynamic-tool"}
    assert tools["r1"]["state"] == "output-available"
    assert tools["r1"]["output"] == "book: in stock"
    assert tools["w1"]["state"] == "output-available"
    assert tools["w1"]["output"] == "charged 500"
    assert tools["w1"]["approval"]["approved"] is True
    assert texts(approved) == ["Checking.", "Done: lookup succeeded, charge succeeded."]
    assert len(server.runner.charges) == 1

    assert report["statusAfterDrop"] == "error"
    assert report["partialText"] == "part one. "
    assert report["hadToken"] is True
    # Rebuilt after the reconnect: one text part, nothing lost or repeated.
    assert texts(messages[5]) == ["part one. part two."]
    assert report["finishes"] == ["stop", "tool-calls", "stop", "transport-error", "stop"]
