"""Check 29 in headless Chromium: ``/ask-many x`` asks once and its durable wait is not run."""

from __future__ import annotations

import re

from app_server import RunningApp
from browser_page import TIMEOUT_MS, app_page_url, chromium_page, needs_chromium, start_agent

from dex_agents.runner import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT

pytestmark = needs_chromium


async def test_ask_many_shows_one_question_and_no_timer(running_app: RunningApp) -> None:
    from playwright.async_api import expect

    console_errors: list[str] = []
    async with chromium_page(console_errors=console_errors) as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        status = page.get_by_test_id("status")
        await expect(status).to_have_attribute("data-status", "waiting_for_user_message")

        composer = page.get_by_placeholder(re.compile("Message the Agent"))
        await composer.fill("/ask-many x")
        await composer.press("Control+Enter")
        question = page.get_by_test_id("question")
        await expect(question).to_have_count(1, timeout=TIMEOUT_MS)
        await expect(question).to_contain_text("x")
        await expect(status).to_have_attribute("data-status", "waiting_for_input")
        timer_cards = page.locator(".card.timer")
        await expect(timer_cards).to_have_count(0)  # the wait came after the question

        await question.get_by_placeholder("Type your answer…").fill("Friday")
        await question.get_by_role("button", name="Submit answer").click()
        await expect(question).to_have_count(0)
        not_run = page.get_by_test_id("bubble-tool").filter(
            has_text=TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
        )
        await expect(not_run).to_have_count(1)
        await expect(page.get_by_text(re.compile("finished with this result: "))).to_be_visible()
        await expect(status).to_have_attribute(
            "data-status", "waiting_for_user_message"
        )  # not on a timer
        await expect(timer_cards).to_have_count(0)
    assert console_errors == []
