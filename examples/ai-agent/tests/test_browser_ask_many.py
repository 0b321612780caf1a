"""Check 29 in headless Chromium: ``/ask-many x`` asks once and its durable wait is not run."""

from __future__ import annotations

import re

import pytest
from app_server import RunningApp
from test_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, skip_reason

from dex_agents.texts import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT

pytestmark = pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "runs")


async def test_ask_many_shows_one_question_and_no_timer(running_app: RunningApp) -> None:
    from playwright.async_api import async_playwright, expect

    console_errors: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        page = await browser.new_page(viewport={"width": 1180, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: console_errors.append(str(error)))
        await page.goto(f"{running_app.base_url}/products/ai-agent/")
        await page.get_by_role("button", name="Start AI Agent →").click()
        status = page.get_by_test_id("status")
        await expect(status).to_contain_text("waiting_for_user_message")

        composer = page.get_by_placeholder(re.compile("Message the Agent"))
        await composer.fill("/ask-many x")
        await composer.press("Control+Enter")
        question = page.get_by_test_id("question")
        await expect(question).to_have_count(1, timeout=TIMEOUT_MS)
        await expect(question).to_contain_text("x")
        await expect(status).to_contain_text("waiting_for_input")
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
        await expect(status).to_contain_text("waiting_for_user_message")  # not on a timer
        await expect(timer_cards).to_have_count(0)
        await browser.close()
    assert console_errors == []
