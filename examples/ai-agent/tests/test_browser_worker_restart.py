"""A Worker SIGKILLed mid-turn: the page recovers on its own once a new Worker runs,
and nothing of the conversation is lost on screen.

The app runs no Worker here: Worker child processes on a private engine serve it, as
in production, so the test can kill one (SIGKILL) while a turn waits and start
another. One conversation holds a plan, a steer, a durable wait, an approval and an
answered question, with a Worker killed during each of the last four.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from app_server import RunningApp
from browser_page import app_page_url, chromium_page, needs_chromium, start_agent

from dex_agents.testing import KillableWorkerProcess, PrivateDexEngine

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = needs_chromium
FACTORY = "dex_agents_ai_agent.agent:create_demo_flow"
RECOVERY_MS = 60_000
USER_MESSAGES = [
    "hello",
    "Research Dex",
    "/wait 300 hold on",
    "steer me now",
    "/wait 2 across a crash",
    '/tool slack__post_message {"channel":"#ops","message":"up"}',
    "/choose Pick a color | Red | Blue",
    "Red",
]


@pytest.fixture
def engine() -> Iterator[PrivateDexEngine]:
    engine = PrivateDexEngine.start()
    yield engine
    engine.close()


class Workers:
    """The one Worker process serving the app; ``restart`` SIGKILLs it and starts another."""

    def __init__(self, engine: PrivateDexEngine, logs: Path) -> None:
        self.engine = engine
        self.logs = logs
        self.started = 0
        self.current = self._start()

    def _start(self) -> KillableWorkerProcess:
        self.started += 1
        return KillableWorkerProcess.start(
            server_address=self.engine.server_address,
            log_path=self.logs / f"worker-{self.started}.log",
            arguments=[FACTORY],
        )

    def restart(self) -> None:
        self.current.kill()
        assert not self.current.is_running()
        self.current = self._start()


async def test_a_whole_conversation_survives_worker_sigkills(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    workers = Workers(engine, tmp_path)
    app = RunningApp(server_address=engine.server_address)
    app.start()
    try:
        async with chromium_page() as page:
            await page.goto(app_page_url(app.base_url))
            await start_agent(page)
            composer = page.locator(".composer textarea")
            await composer.fill("hello")
            await composer.press("Control+Enter")
            # The stored reply: its live card can show the same text a moment longer.
            replies = page.get_by_test_id("bubble-assistant")
            await expect(replies.get_by_text("Local demo response: hello")).to_be_visible()

            # A plan, drafted and executed.
            plan = page.get_by_test_id("plan")
            await page.get_by_label("Plan mode").check()
            await composer.fill("Research Dex")
            await composer.press("Control+Enter")
            await plan.get_by_role("button", name="Execute plan").click()
            await expect(plan).to_contain_text("Plan · completed")

            # Killed during a durable wait with a message queued: Steer after the restart.
            await composer.fill("/wait 300 hold on")
            await composer.press("Control+Enter")
            await expect(page.get_by_text("Durable timer · 300s")).to_be_visible()
            await composer.fill("steer me now")
            await composer.press("Control+Enter")
            queued = page.get_by_test_id("queued")
            await expect(queued).to_contain_text("steer me now")
            workers.restart()
            await queued.get_by_role("button", name="Steer").click()
            steered = replies.get_by_text("Local demo response: steer me now")
            await expect(steered).to_be_visible(timeout=RECOVERY_MS)

            # Killed during a short durable wait: the new Worker's Timer fires.
            await composer.fill("/wait 2 across a crash")
            await composer.press("Control+Enter")
            await expect(page.get_by_text("Durable timer · 2s")).to_be_visible()
            workers.restart()
            finished = page.get_by_text(
                re.compile("The tool finished with this result: .*completed")
            )
            await expect(finished).to_be_visible(timeout=RECOVERY_MS)

            # Killed while an approval is pending: approving after the restart runs the write.
            await composer.fill(USER_MESSAGES[5])
            await composer.press("Control+Enter")
            approval = page.get_by_test_id("approval")
            await expect(approval).to_be_visible()
            workers.restart()
            await approval.get_by_role("button", name="Approve").click()
            posted = page.get_by_text("Demo Slack message posted to #ops: up")
            await expect(posted).to_have_count(2, timeout=RECOVERY_MS)

            # Killed while a question waits: the answer after the restart resumes the turn.
            await composer.fill("/choose Pick a color | Red | Blue")
            await composer.press("Control+Enter")
            question = page.get_by_test_id("question")
            await expect(question).to_contain_text("Pick a color")
            workers.restart()
            await question.get_by_role("button", name=re.compile("^Red")).click()
            await expect(question).to_have_count(0, timeout=RECOVERY_MS)
            answered = page.get_by_text(re.compile("The tool finished with this result: .*Red"))
            await expect(answered).to_be_visible(timeout=RECOVERY_MS)

            await check_nothing_is_lost(page)
            await page.reload()
            await check_nothing_is_lost(page)
            # The conversation goes on.
            await composer.fill("still here")
            await composer.press("Control+Enter")
            await expect(replies.get_by_text("Local demo response: still here")).to_be_visible()
            await expect(page.get_by_test_id("offline")).to_have_count(0)
            await expect(page.locator(".dock .error")).to_have_count(0)
        assert workers.started == 5
    finally:
        app.stop()
        workers.current.kill()


async def check_nothing_is_lost(page: Page) -> None:
    """Every turn, in order, with its plan, steer, wait, approval and answer."""
    from playwright.async_api import expect

    users = page.get_by_test_id("bubble-user").locator("p")
    await expect(users).to_have_text(USER_MESSAGES)
    plan = page.get_by_test_id("plan")
    await expect(plan).to_contain_text("Plan · completed")
    await expect(plan).to_contain_text("2/2 completed")
    for reply in (
        "Local demo response: hello",
        "I completed the approved plan.",
        "Local demo response: steer me now",
    ):
        await expect(page.get_by_text(reply, exact=True)).to_have_count(1)
    outcomes = page.get_by_test_id("bubble-tool").filter(has_text="durable_wait")
    await expect(outcomes.get_by_test_id("tool-outcome")).to_have_text(["interrupted", "completed"])
    posted = page.get_by_test_id("bubble-tool").filter(has_text="slack__post_message")
    await expect(posted).to_contain_text("Demo Slack message posted to #ops: up")
    await expect(page.get_by_test_id("approval")).to_have_count(0)
    await expect(page.get_by_test_id("question")).to_have_count(0)
    await expect(page.get_by_text("0 queued · 0 steered")).to_be_visible()
