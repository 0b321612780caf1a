"""A chat that reads like one, in headless Chromium: the conversation list, markdown
(sanitized) with copyable code, long text that wraps, a question that stays with its
answer, approval results on the request, the limit before sending, the way back from an
unknown Agent, Back after New Agent, the plan card and the live card after Stop.

``test_the_chat_at_desktop_and_phone_width`` saves ``chat-1280.png`` and ``chat-390.png``
to ``$DEX_AGENTS_SCREENSHOT_DIR`` (the checked-in ones are in ``examples/ai-agent/docs``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING

from app_server import RunningApp
from browser_page import app_page_url, chromium_page, needs_chromium, start_agent
from test_browser import RECORD_TEST_IDS, screenshot_directory

if TYPE_CHECKING:
    from playwright.async_api import Page, Route

pytestmark = needs_chromium
LONG = "0123456789abcdef" * 25  # 400 characters, no break
XSS = '<img src=x onerror="window.hacked=1"> <script>window.hacked=2</script>'
NO_OVERFLOW = """() => {
  const page = document.documentElement.scrollWidth <= window.innerWidth;
  const boxes = [...document.querySelectorAll(".bubble, .card")].filter(
    (box) => box.scrollWidth > box.clientWidth + 1
      || box.getBoundingClientRect().right > window.innerWidth + 1);
  return page && boxes.length === 0;
}"""


async def send(page: Page, text: str) -> None:
    composer = page.locator(".composer textarea")
    await composer.fill(text)
    await composer.press("Control+Enter")


async def idle(page: Page) -> None:
    from playwright.async_api import expect

    status = page.get_by_test_id("status")
    await expect(status).to_have_attribute("data-status", "waiting_for_user_message")


async def test_the_chat_at_desktop_and_phone_width(running_app: RunningApp, tmp_path: Path) -> None:
    from playwright.async_api import expect

    shots = screenshot_directory(tmp_path)
    async with chromium_page(viewport={"width": 1280, "height": 900}) as page:
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await page.goto(app_page_url(running_app.base_url))
        # The Portal's Start is on the first screen.
        start = page.get_by_role("button", name="Start AI Agent →")
        await expect(start).to_be_in_viewport()
        await start_agent(page)
        await idle(page)
        await send(page, "Draft the release notes")
        await expect(
            page.get_by_text("Local demo response: Draft the release notes")
        ).to_be_visible()
        earlier = page.url
        await page.get_by_role("button", name="New Agent").click()
        await start_agent(page)
        await idle(page)

        await send(page, "Summarize the open incidents")
        await expect(page.get_by_text("Local demo response: Summarize")).to_be_visible()
        # The conversation list: both Agents, newest first, titled by their first message.
        sessions = page.get_by_test_id("conversations").locator(".session")
        titles = sessions.locator(".session-title")
        await expect(titles.filter(has_text="Summarize the open incidents")).to_have_count(1)
        await expect(titles.filter(has_text="Draft the release notes")).to_have_count(1)
        current = page.locator(".session.current .session-title")
        await expect(current).to_have_text("Summarize the open incidents")
        assert await titles.first.text_content() == "Summarize the open incidents"

        # Markdown, sanitized; a code block with Copy.
        await send(page, "/markdown")
        reply = page.get_by_test_id("bubble-assistant").filter(has_text="A reply in markdown")
        await expect(reply.locator("h2")).to_have_text("A reply in markdown")
        await expect(reply.locator("li strong")).to_have_text("bold")
        await expect(reply.locator("a")).to_have_attribute("rel", "noopener noreferrer")
        await reply.get_by_role("button", name="Copy").click()
        await expect(reply.get_by_role("button", name="Copied")).to_be_visible()
        copied = await page.evaluate("navigator.clipboard.readText()")
        assert copied == 'print("hello from a code block")'

        # A long unbroken string wraps inside its bubbles.
        await send(page, LONG)
        await expect(page.get_by_test_id("bubble-assistant").filter(has_text=LONG)).to_be_visible()
        assert await page.evaluate(NO_OVERFLOW)

        # A question stays on screen with its answer.
        await send(page, "/choose Pick a color | Red | Blue")
        question = page.get_by_test_id("question")
        await question.get_by_role("button", name=re.compile("^Red")).click()
        await expect(question).to_have_count(0)
        asked = page.get_by_test_id("asked-question")
        await expect(asked).to_contain_text("Pick a color")
        await expect(page.get_by_text("You answered")).to_be_visible()
        await idle(page)
        # Screenshots of the window (a full-page one misplaces the fixed parts), tall
        # enough to hold the whole conversation.
        await page.set_viewport_size({"width": 1280, "height": 1500})
        await page.wait_for_timeout(300)  # the page follows its bottom after the resize
        await page.screenshot(path=str(shots / "chat-1280.png"))

        await page.set_viewport_size({"width": 390, "height": 844})
        assert await page.evaluate(NO_OVERFLOW)
        toggle = page.get_by_role("button", name=re.compile("Conversations"))
        await toggle.click()
        await expect(current).to_be_visible()
        await page.set_viewport_size({"width": 390, "height": 1900})
        await page.evaluate("window.scrollTo(0, 0)")
        await page.screenshot(path=str(shots / "chat-390.png"))
        await page.set_viewport_size({"width": 390, "height": 844})

        # Raw HTML in a reply is shown as text, never run.
        await send(page, XSS)
        echo = page.get_by_test_id("bubble-assistant").filter(has_text="onerror")
        await expect(echo).to_contain_text("<img src=x")
        assert await echo.locator("img, script").count() == 0
        assert await page.evaluate("window.hacked") is None
        # The list leads back to the earlier Agent.
        await sessions.filter(has_text="Draft the release notes").click()
        await expect(page).to_have_url(earlier)
        await expect(
            page.get_by_text("Local demo response: Draft the release notes")
        ).to_be_visible()


async def test_approval_results_stay_on_the_request(running_app: RunningApp) -> None:
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        post = '/tool slack__post_message {"channel":"#general","message":"hi"}'
        requests = page.get_by_test_id("bubble-tool-request")
        for decision, result in (("Approve", "Approved"), ("Reject", "Rejected")):
            await send(page, post)
            approval = page.get_by_test_id("approval")
            await expect(requests.last.get_by_test_id("approval-result")).to_have_text(
                "Awaiting approval"
            )
            await approval.get_by_role("button", name=decision).click()
            await expect(approval).to_have_count(0)
            await idle(page)
            await expect(requests.last.get_by_test_id("approval-result")).to_have_text(result)
        rejected = page.get_by_test_id("bubble-tool").last
        await expect(rejected.get_by_test_id("tool-outcome")).to_have_text("rejected")
        await page.reload()  # the results come from durable state
        await expect(requests.first.get_by_test_id("approval-result")).to_have_text("Approved")
        await expect(requests.last.get_by_test_id("approval-result")).to_have_text("Rejected")


async def test_a_finished_plan_stays_above_a_new_request_and_its_approval(
    running_app: RunningApp,
) -> None:
    """A completed plan card stays where its plan was written; it never sits between a
    later tool request and that request's approval."""
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        await page.get_by_label("Plan mode").check()
        await send(page, "Research Dex")
        plan = page.get_by_test_id("plan")
        await plan.get_by_role("button", name="Execute plan").click()
        await expect(plan).to_contain_text("Plan · completed")
        await idle(page)
        await send(page, '/tool slack__post_message {"channel":"#general","message":"hi"}')
        await expect(page.get_by_test_id("approval")).to_be_visible()
        order = await page.evaluate(
            """() => {
              const items = [...document.querySelector(".timeline").children];
              const ids = items.map((item) => item.dataset.testid ?? item.className);
              return {
                plan: ids.indexOf("plan"),
                request: ids.lastIndexOf("bubble-tool-request"),
                approval: ids.indexOf("approval"),
              };
            }"""
        )
        assert order["plan"] < order["request"]
        assert order["approval"] == order["request"] + 1


async def test_stop_leaves_no_ghost_response_card(running_app: RunningApp) -> None:
    """Stop during a streamed reply, with the next message queued: the stopped reply's
    live card goes (it is never stored); only the next turn's card streams."""
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        await page.evaluate(MAX_LIVE_CARDS)
        await send(page, "/slow A")
        live = page.get_by_test_id("live-response")
        await expect(live.filter(has_text="Slow reply A")).to_be_visible()
        await send(page, "/slow B")  # queued behind the streaming turn
        await page.locator(".dock").get_by_role("button", name=re.compile("^Stop")).click()
        await expect(live.filter(has_text="Slow reply B")).to_be_visible()
        await expect(live.filter(has_text="Slow reply A")).to_have_count(0)
        stored = page.get_by_test_id("bubble-assistant").filter(has_text="Slow reply B")
        await expect(stored).to_be_visible()
        await idle(page)
        assert await page.evaluate("window.maxLiveCards") == 1
        await expect(
            page.get_by_test_id("bubble-assistant").filter(has_text="Slow reply A")
        ).to_have_count(0)


async def test_an_unknown_agent_offers_the_way_back_and_back_works(
    running_app: RunningApp,
) -> None:
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(f"{app_page_url(running_app.base_url)}?workflowId=no-such-agent")
        missing = page.get_by_test_id("missing")
        await expect(missing).to_contain_text("No Agent with this ID")
        await missing.get_by_role("button", name="Start a new Agent").click()
        await expect(page.get_by_role("heading", name="Configure your AI Agent")).to_be_visible()
        await start_agent(page)
        chat = page.url
        await page.get_by_role("button", name="New Agent").click()
        await expect(page.get_by_role("heading", name="Configure your AI Agent")).to_be_visible()
        await page.go_back()  # back to the conversation, not to a blank page
        await expect(page).to_have_url(chat)
        await expect(page.get_by_test_id("status")).to_be_visible()


async def test_the_limit_shows_before_sending(running_app: RunningApp) -> None:
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        await expect(page.locator(".composer p.hint")).to_contain_text("up to 512 KiB a message")
        composer = page.locator(".composer textarea")
        await composer.fill("y" * (600 * 1024))
        await expect(page.get_by_test_id("too-large")).to_have_text(
            "This message is 600 KiB; the limit is 512 KiB."
        )
        await expect(page.get_by_role("button", name="Send")).to_be_disabled()
        await composer.fill("字" * 100_000)  # 300 KB of UTF-8: fits
        await expect(page.get_by_test_id("too-large")).to_have_count(0)
        await page.get_by_role("button", name="Send").click()
        user = page.get_by_test_id("bubble-user").filter(has_text="字字字")
        await expect(user).to_have_count(1)


async def test_a_reload_makes_one_snapshot_request(running_app: RunningApp) -> None:
    """A reload focuses the window in a real browser, while the load's snapshot request
    is in flight: that request answers for the focus too."""
    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        snapshots: list[str] = []
        page.on("request", lambda r: snapshots.append(r.url) if "/snapshot?" in r.url else None)
        held = asyncio.Event()

        async def focus_while_in_flight(route: Route) -> None:
            if not held.is_set():
                held.set()
                await page.evaluate("window.dispatchEvent(new Event('focus'))")
            await route.continue_()

        await page.route("**/snapshot?*", focus_while_in_flight)
        await page.reload()
        await asyncio.wait_for(held.wait(), 30)
        await idle(page)
        await page.wait_for_timeout(1000)  # a refresh for the focus would have started
        assert len(snapshots) == 1


async def test_a_stale_csrf_token_is_renewed_once(running_app: RunningApp) -> None:
    """After a restart of the app an open page's token is stale: its next mutation gets
    403 ``csrf``, reads the page's new token and goes through."""
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        await idle(page)
        refused: list[str] = []

        async def stale_once(route: Route) -> None:
            if refused:
                await route.continue_()
                return
            refused.append(route.request.headers.get("x-csrf-token", ""))
            body = '{"error": "missing or stale CSRF token: reload the page", "code": "csrf"}'
            await route.fulfill(status=403, body=body, content_type="application/json")

        await page.route("**/products/ai-agent/messages", stale_once)
        async with page.expect_request(lambda r: r.url.endswith("/products/ai-agent/")):
            await send(page, "after a restart")
        await expect(page.get_by_text("Local demo response: after a restart")).to_be_visible()
        assert refused == [running_app.trust.csrf_token]


MAX_LIVE_CARDS = RECORD_TEST_IDS.replace(
    "window.seenTestIds = new Set();", "window.maxLiveCards = 0;"
).replace(
    """    for (const element of document.querySelectorAll("[data-testid]")) {
      window.seenTestIds.add(element.dataset.testid);
    }""",
    """    const count = document.querySelectorAll("[data-testid=live-response]").length;
    window.maxLiveCards = Math.max(window.maxLiveCards, count);""",
)
