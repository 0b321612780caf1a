"""The real AI SDK chat client (`ai`, bundled with esbuild) in a page in headless Chromium:
it renders a streamed turn, approves a tool with a click, and resumes after a drop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from browser_tools import (
    assert_chat_scenario_report,
    bundle_chat_page,
    chromium_page,
    chromium_skip_reason,
)
from ui_support import arm_drop_in_the_slow_turn, new_session_id, serve_ui_session

PAGE = """<!doctype html>
<html><body><p id="status"></p><ol id="chat"></ol>
<script type="module" src="/chat.js"></script></body></html>
"""


@pytest.fixture(scope="module")
def chat_bundle(ai_package: Path) -> str:
    reason = chromium_skip_reason()
    if reason:
        pytest.skip(reason)
    bundle, reason = bundle_chat_page(ai_package)
    if bundle is None:
        pytest.skip(reason)
    return bundle


async def test_the_ai_sdk_chat_in_chromium_renders_approves_and_resumes(
    engine, chat_bundle: str
) -> None:
    static = {"/chat": PAGE, "/chat.js": chat_bundle}
    async with serve_ui_session(engine.address, static=static) as server:
        sid = new_session_id()
        await server.start_session(sid)
        # A browser drops the bytes it has not read yet when the connection breaks, so the
        # drop waits until the page has rendered the first delta.
        rendered_first_delta = asyncio.Event()
        arm_drop_in_the_slow_turn(server, hold=rendered_first_delta)
        async with chromium_page() as page:
            await page.goto(f"{server.base_url}/chat?session={sid}")
            # The approval request streamed in is rendered as a button; the user approves.
            approve = page.locator("button.approve")
            await approve.wait_for(timeout=30_000)
            assert await approve.inner_text() == "Approve charge"
            assert server.runner.charges == []
            await approve.click()
            await server.cut.cut.wait()
            await page.locator("#chat p", has_text="assistant: part one.").wait_for()
            rendered_first_delta.set()
            server.runner.release.set()  # the turn goes on after the drop
            await page.wait_for_function("window.done !== undefined", timeout=30_000)
            done = await page.evaluate("window.done")
            assert "error" not in done, done.get("error")
            rendered = await page.locator("#chat p, #chat .tool").all_inner_texts()
            status = await page.inner_text("#status")

    assert_chat_scenario_report(done["report"], charges=server.runner.charges)
    assert status == "ready"
    # Every part rendered once, in order: nothing lost or repeated across the drop.
    assert rendered == [
        "user: hello",
        "assistant: Hello there",
        "user: charge",
        "assistant: Checking.",
        "tool lookup [output-available]: book: in stock",
        "tool charge [output-available]: charged 500",
        "assistant: Done: lookup succeeded, charge succeeded.",
        "user: slow",
        "assistant: part one. part two.",
    ]
