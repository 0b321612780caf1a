"""The real AI SDK chat client (`ai` from npm, under node) against the Python server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from browser_tools import assert_chat_scenario_report
from ui_support import arm_drop_in_the_slow_turn, new_session_id, serve_ui_session


async def test_the_ai_sdk_chat_streams_approves_and_resumes_after_a_drop(
    engine, ai_package: Path
) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid)
        arm_drop_in_the_slow_turn(server)
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

    assert_chat_scenario_report(report, charges=server.runner.charges)
