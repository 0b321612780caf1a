"""A Worker SIGKILLed mid-turn: the page recovers on its own once a new Worker runs.

The app runs no Worker here: Worker child processes on a private engine serve it,
as in production, so the test can kill one during a durable wait and during a
pending approval and start another.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from app_server import RunningApp
from test_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, skip_reason

from dex_agents.testing import KillableWorkerProcess, PrivateDexEngine

pytestmark = pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "runs")
FACTORY = "dex_agents_ai_agent.agent:create_demo_flow"
RECOVERY_MS = 60_000


@pytest.fixture
def engine() -> Iterator[PrivateDexEngine]:
    engine = PrivateDexEngine.start()
    yield engine
    engine.close()


def start_worker(engine: PrivateDexEngine, log: Path) -> KillableWorkerProcess:
    return KillableWorkerProcess.start(
        server_address=engine.server_address, log_path=log, arguments=[FACTORY]
    )


async def test_the_page_recovers_after_a_worker_sigkill(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    worker = start_worker(engine, tmp_path / "worker-1.log")
    app = RunningApp(server_address=engine.server_address)
    app.start()
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            )
            page = await browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            await page.goto(f"{app.base_url}/products/ai-agent/")
            await page.get_by_role("button", name="Start AI Agent →").click()
            await expect(page).to_have_url(re.compile(r"workflowId="))
            composer = page.get_by_placeholder(re.compile("Message the Agent"))
            await composer.fill("hello")
            await composer.press("Control+Enter")
            await expect(page.get_by_text("Local demo response: hello")).to_be_visible()

            # Killed during a durable wait: the new Worker's Timer fires and the turn ends.
            await composer.fill("/wait 2 across a crash")
            await composer.press("Control+Enter")
            await expect(page.get_by_text("Durable timer · 2s")).to_be_visible()
            worker.kill()
            worker = start_worker(engine, tmp_path / "worker-2.log")
            finished = page.get_by_text(
                re.compile("The tool finished with this result: .*completed")
            )
            await expect(finished).to_be_visible(timeout=RECOVERY_MS)

            # Killed while an approval is pending: approving after the restart runs the write.
            await composer.fill('/tool slack__post_message {"channel":"#ops","message":"up"}')
            await composer.press("Control+Enter")
            approval = page.get_by_test_id("approval")
            await expect(approval).to_be_visible()
            worker.kill()
            worker = start_worker(engine, tmp_path / "worker-3.log")
            await approval.get_by_role("button", name="Approve").click()
            posted = page.get_by_text("Demo Slack message posted to #ops: up")
            await expect(posted).to_have_count(2, timeout=RECOVERY_MS)

            # Nothing is lost on screen: every turn is still there, in order.
            users = page.get_by_test_id("bubble-user").locator("p")
            await expect(users).to_have_text(
                ["hello", "/wait 2 across a crash", re.compile("^/tool slack__post_message")]
            )
            await browser.close()
    finally:
        app.stop()
        worker.kill()
