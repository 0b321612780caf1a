"""The app end to end in headless Debian Chromium (Playwright): the Portal, a chat turn,
an approval, a reload, a plan and a question, with console errors and every response
captured. Screenshots of both screens go to ``$DEX_AGENTS_SCREENSHOT_DIR`` (else the
test's temporary directory)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING

import dex
from app_server import SECRET, RunningApp
from browser_page import TIMEOUT_MS, app_page_url, chromium_page, needs_chromium, start_agent

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page, Response, Route


def screenshot_directory(default: Path) -> Path:
    directory = Path(os.environ.get("DEX_AGENTS_SCREENSHOT_DIR") or default)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


pytestmark = needs_chromium


async def test_a_chat_with_an_approval_a_plan_and_a_question(
    running_app: RunningApp, tmp_path: Path
) -> None:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import expect

    shots = screenshot_directory(tmp_path)
    console_errors: list[str] = []
    bodies: list[tuple[str, int, str]] = []

    async with chromium_page(console_errors=console_errors) as page:

        async def record(response: Response) -> None:
            if "/events" in response.url or 300 <= response.status < 400:
                # An event stream stays open; a redirect has no body.
                bodies.append((response.url, response.status, ""))
                return
            try:
                body = await response.text()
            except PlaywrightError:  # answered as a reload navigated away: the body is gone
                body = ""
            bodies.append((response.url, response.status, body))

        page.on("response", record)
        portal_requests: list[str] = []
        page.on("request", lambda r: portal_requests.append(r.url) if "/portal" in r.url else None)

        await page.goto(app_page_url(running_app.base_url))
        await check_portal(page)
        await page.screenshot(path=str(shots / "portal.png"), full_page=True)
        async with held(page, "/start"):
            await page.get_by_role("button", name="Start AI Agent →").click()
            await expect(page.get_by_role("button", name="Starting Agent…")).to_be_disabled()
        await expect(page).to_have_url(re.compile(r"\?workflowId=[0-9a-f-]{36}$"))
        status = page.get_by_test_id("status")
        await expect(status).to_have_attribute("data-status", "waiting_for_user_message")
        await expect(status).to_have_text("Ready · mock/dex")
        await expect(page.get_by_text("Send a message to begin.")).to_be_visible()
        workflow_id = page.url.rsplit("=", 1)[1]
        await page.locator("footer.footer summary").click()  # IDs sit behind a toggle
        await expect(page.get_by_test_id("flow-id")).to_have_text(f"Flow ID: {workflow_id}")

        composer = page.get_by_placeholder(re.compile("Message the Agent"))
        await page.evaluate(RECORD_TEST_IDS)  # the live Response card may last a moment only
        await composer.fill("hello")
        await composer.press("Enter")  # a new line, not a send
        await expect(composer).to_have_value("hello\n")
        async with held(page, "/messages"):  # Send is disabled while the send is in flight
            await composer.press("Control+Enter")
            await expect(page.locator(".badge.submitting")).to_be_visible()
            await composer.fill("typed meanwhile")
            await expect(page.get_by_role("button", name="Send")).to_be_disabled()
        await expect(page.get_by_role("button", name="Send")).to_be_enabled()
        await composer.fill("")
        await expect(page.get_by_text("Local demo response: hello")).to_be_visible()
        assert await page.evaluate("[...window.seenTestIds].includes('live-response')")
        await expect(page.locator(".card.thinking")).to_have_count(0)  # the mock never reasons
        rows = page.locator(".activity-row summary")
        await expect(rows.first).to_have_text("Started working")
        await expect(rows.filter(has_text="Finished")).to_have_count(1)

        await composer.fill('/tool slack__post_message {"channel":"#general","message":"hi"}')
        await composer.press("Alt+Enter")
        approval = page.get_by_test_id("approval")
        await expect(approval).to_contain_text("Approve tool: slack__post_message")
        await expect(status).to_have_attribute("data-status", "waiting_for_tool_approval")
        async with held(page, "/tool-approvals"):
            await approval.get_by_role("button", name="Approve").click()
            await expect_all_disabled(approval.get_by_role("button"), 2)
        await expect(page.get_by_text("Demo Slack message posted to #general: hi")).to_have_count(
            2  # the tool bubble and the reply that quotes it
        )
        await expect(approval).to_have_count(0)

        snapshots: list[str] = []
        page.on("request", lambda r: snapshots.append(r.url) if "/snapshot?" in r.url else None)
        await page.reload()
        await expect(page.get_by_text("Local demo response: hello")).to_be_visible()
        assert len(snapshots) == 1  # one snapshot request restores the whole page
        await check_queue_and_steer(page, running_app, shots)
        await check_steer_over_an_approval_and_fifo(page)

        await page.get_by_label("Plan mode").check()
        await page.get_by_placeholder(re.compile("drafts a plan")).fill("Research Dex")
        await page.get_by_role("button", name="Create plan").click()
        plan = page.get_by_test_id("plan")
        await expect(plan).to_contain_text("Plan · draft")
        await expect(plan).to_contain_text("revision 1 · 0/2 completed")
        # Business tools are refused while a draft is discussed (Plan mode off).
        await composer.fill('/tool search__web_search {"query":"x"}')
        await composer.press("Control+Enter")
        await expect(page.get_by_text('"tool": "search__web_search"')).to_be_visible()
        await expect(page.get_by_text("unknown_or_disabled_tool")).to_be_visible()
        # Events show the refusal before the snapshot does: wait for the stored reply and
        # then the idle session, or the click below lands on the snapshot from before the
        # turn, and the turn's messages end the pending state it shows.
        refusal = page.get_by_test_id("bubble-assistant").filter(
            has_text="unknown_or_disabled_tool"
        )
        await expect(refusal).to_be_visible()
        await expect(status).to_have_attribute("data-status", "waiting_for_user_message")
        await expect(plan).to_contain_text("Plan · draft")
        # An accepted request shows as pending until its turn starts: answer the first
        # click here, so the request never reaches the Agent, then reload and run it.
        await page.route(
            "**/plans/execute",
            lambda route: route.fulfill(json={"accepted": True}),
        )
        await plan.get_by_role("button", name="Execute plan").click()
        await expect(plan.get_by_test_id("execution-pending")).to_have_text(
            "Execution request pending…"
        )
        await expect(plan.get_by_role("button", name="Execute plan")).to_have_count(0)
        await page.unroute("**/plans/execute")
        await page.reload()
        await expect(plan.get_by_test_id("execution-pending")).to_have_count(0)
        await plan.get_by_role("button", name="Execute plan").click()
        await expect(plan).to_contain_text("Plan · completed")
        await expect(plan).to_contain_text("2/2 completed")
        await expect(page.get_by_text("I completed the approved plan.")).to_be_visible()
        await check_plan_stop_and_clear(page, shots)

        await composer.fill("/choose Pick a color | Red | Blue")
        await composer.press("Control+Enter")
        question = page.get_by_test_id("question")
        await expect(question).to_contain_text("Agent needs your input")
        await page.screenshot(path=str(shots / "chat.png"), full_page=False)
        await page.screenshot(path=str(shots / "chat-full.png"), full_page=True)
        async with held(page, "/user-input"):
            await question.get_by_role("button", name=re.compile("^Red")).click()
            await expect(question.get_by_role("button", name="Red ✓")).to_be_visible()
            await expect_all_disabled(question.get_by_role("button"), 2)
        await expect(question).to_have_count(0)
        await expect(page.get_by_test_id("bubble-user").last.locator("p")).to_have_text("Red")
        await expect(status).to_have_attribute("data-status", "waiting_for_user_message")
        await check_free_text_question_and_scrolling(page)

        chat_url = page.url
        await page.get_by_role("button", name="New Agent").click()
        await expect(page.get_by_role("heading", name="Configure your AI Agent")).to_be_visible()
        assert "workflowId" not in page.url
        await page.clock.install()  # the fallback refresh runs on a clock the test moves
        await page.goto(chat_url)  # the old Agent still opens
        await expect(page.get_by_text("Local demo response: hello")).to_be_visible()
        await check_refresh_triggers(page)
        stop = dex.StopFlowOptions(type=dex.StopType.TERMINATE, reason="stopped by the test")
        running_app.call(running_app.host.dex_client.stop_flow(workflow_id, stop))
        await page.evaluate("window.dispatchEvent(new Event('focus'))")
        banner = page.locator(".banner[role=alert]")
        await expect(banner).to_contain_text("This Agent has been stopped")
        await expect(banner).to_contain_text("stopped by the test")  # the stop reason
        await expect(page.locator(".composer textarea")).to_be_disabled()

    print(sorted({(url.split("?")[0], status) for url, status, _ in bodies}))
    # The two stale queue clicks answer 404 on purpose; Chromium logs each failed load.
    stale = [e for e in console_errors if "status of 404" in e]
    assert len(stale) == 2
    assert [e for e in console_errors if e not in stale] == []
    assert sorted(url.rsplit("/", 1)[1] for url, status, _ in bodies if status == 404) == [
        "delete",
        "steer",
    ]
    assert [url for url, status, _ in bodies if status >= 500] == []
    assert all(SECRET not in body for _, _, body in bodies)
    assert len(portal_requests) == 2  # one per Portal visit


async def test_broker_tools_ask_only_the_selected_mcp_servers(mcp_app: RunningApp) -> None:
    """With the shipped stdio demo servers, the broker tools are listed without an
    approval badge and list a selected server's resources; another server is refused."""
    from playwright.async_api import expect

    async with chromium_page() as page:
        await page.goto(app_page_url(mcp_app.base_url))
        broker = page.locator("[data-tool=mcp_list_resources_and_prompts]")
        await expect(broker).to_be_visible()
        await expect(broker).not_to_contain_text("approval")
        await page.get_by_label("google_docs", exact=True).uncheck()
        await expect(broker).to_be_visible()  # broker tools belong to no one server
        await start_agent(page)
        await expect(page.get_by_test_id("status")).to_have_attribute(
            "data-status", "waiting_for_user_message"
        )

        composer = page.locator(".composer textarea")
        await composer.fill('/tool mcp_list_resources_and_prompts {"server":"search"}')
        await composer.press("Control+Enter")
        tool = page.get_by_test_id("bubble-tool")
        await expect(tool.last).to_contain_text('"resources": []')
        await expect(page.get_by_test_id("approval")).to_have_count(0)
        await composer.fill('/tool mcp_list_resources_and_prompts {"server":"google_docs"}')
        await composer.press("Control+Enter")
        await expect(tool).to_have_count(2)
        await expect(tool.last).to_contain_text("not selected for this Agent")


async def test_a_late_text_delta_of_an_ended_turn_shows_no_live_card(
    running_app: RunningApp,
) -> None:
    """A text delta that reaches the page after its turn ended (a click-triggered refresh
    can answer first) does not bring the turn's live Response card back beside the stored
    reply. The event stream is answered here with such a delta of the finished turn."""
    from playwright.async_api import expect

    async with chromium_page(viewport=None) as page:
        await page.goto(app_page_url(running_app.base_url))
        await start_agent(page)
        composer = page.get_by_placeholder(re.compile("Message the Agent"))
        await composer.fill("hello")
        await composer.press("Control+Enter")
        reply = page.get_by_test_id("bubble-assistant").filter(
            has_text="Local demo response: hello"
        )
        await expect(reply).to_be_visible()
        await expect(page.get_by_test_id("status")).to_have_attribute(
            "data-status", "waiting_for_user_message"
        )

        late = {
            "type": "text_delta",
            "turn_id": "turn-1",
            "attempt": 1,
            "step_execution_id": "RunModel-late",
            "payload": json.dumps({"text": "Local demo response: hello"}),
        }
        delivered = asyncio.Event()

        async def late_delta(route: Route) -> None:
            delivered.set()
            body = f"retry: 600000\ndata: {json.dumps(late)}\n\n"
            await route.fulfill(body=body, headers={"Content-Type": "text/event-stream"})

        await page.route("**/products/ai-agent/events?*", late_delta)
        # Recorded from the page's first script on: the card may last a moment only.
        await page.add_init_script(RECORD_TEST_IDS_FROM_LOAD)
        await page.reload()
        await expect(reply).to_be_visible()
        await asyncio.wait_for(delivered.wait(), TIMEOUT_MS / 1000)
        await page.wait_for_timeout(1500)  # the delta and the refresh it triggers are applied
        assert not await page.evaluate("[...window.seenTestIds].includes('live-response')")
        await expect(page.get_by_test_id("live-response")).to_have_count(0)


async def check_portal(page: Page) -> None:
    from playwright.async_api import expect

    await expect(page.get_by_role("heading", name="Configure your AI Agent")).to_be_visible()
    options = page.locator("select option")
    await expect(options).to_have_count(6)
    await expect(page.locator("select option[value=anthropic]")).to_be_disabled()
    await expect(page.locator("select option[value=anthropic]")).to_contain_text("not configured")
    await expect(page.get_by_label("Model")).to_have_value("mock/dex")
    await expect(page.get_by_label("Model")).to_be_disabled()
    hint = page.locator(".env-hint")  # the test server has OpenAI and Groq keys only
    await expect(hint).to_contain_text("ANTHROPIC_API_KEY, GEMINI_API_KEY")
    await expect(hint).to_contain_text("examples/.env")
    await expect(hint).not_to_contain_text("OPENAI_API_KEY")
    for server in ("google_docs", "search", "slack"):
        await expect(page.get_by_label(server, exact=True)).to_be_checked()
    for tool in ("slack__post_message", "google_docs__create_document"):
        await expect(page.locator(f"[data-tool={tool}]")).to_contain_text("approval")
    await expect(page.locator("[data-tool=search__web_search]")).not_to_contain_text("approval")
    await expect(page.locator(".pill")).to_have_text(["write_todos", "ask_user", "durable_wait"])
    start = page.get_by_role("button", name="Start AI Agent →")
    await expect(start).to_be_enabled()
    tools = page.locator("[data-tool] input[type=checkbox]")
    for index in range(await tools.count()):
        await tools.nth(index).uncheck()
    tool_error = page.get_by_text("Select at least one available MCP tool, or disable MCP.")
    await expect(tool_error).to_be_visible()
    await expect(start).to_be_disabled()
    for index in range(await tools.count()):
        await tools.nth(index).check()
    await expect(tool_error).to_have_count(0)
    await expect(start).to_be_enabled()
    for server in ("google_docs", "search", "slack"):
        await page.get_by_label(server, exact=True).uncheck()
    server_error = page.get_by_text("Select at least one MCP server, or disable MCP.")
    await expect(server_error).to_be_visible()
    await expect(start).to_be_disabled()
    await page.get_by_label("Enable MCP").uncheck()
    await expect(start).to_be_enabled()
    await page.get_by_label("Enable MCP").check()
    for server in ("google_docs", "search", "slack"):
        await page.get_by_label(server, exact=True).check()
    await expect(start).to_be_enabled()


async def check_queue_and_steer(page: Page, app: RunningApp, shots: Path) -> None:
    """A durable wait; messages queue behind it; Edit, Delete, a stale Steer and Delete
    (the message taken before the click lands), then Steer interrupts the wait."""
    from playwright.async_api import expect

    composer = page.locator(".composer textarea")  # its placeholder follows Plan mode
    await composer.fill("/wait 300 check tickets")
    await composer.press("Control+Enter")
    await expect(page.get_by_text("Durable timer · 300s")).to_be_visible()
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "waiting_for_timer"
    )
    await page.reload()  # the wait is durable state, not page state
    await expect(page.get_by_text("Durable timer · 300s")).to_be_visible()
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "waiting_for_timer"
    )
    queued = page.get_by_test_id("queued")
    plan_mode = page.get_by_label("Plan mode")
    for text in ("replace the objective", "drop me", "edit me"):
        await composer.fill(text)
        if text == "edit me":
            await plan_mode.check()
        await composer.press("Control+Enter")
    await expect(queued).to_have_count(3)
    await expect(page.get_by_text("3 queued · 0 steered")).to_be_visible()
    await expect(page.get_by_text("Durable timer · 300s")).to_be_visible()  # not interrupted
    await expect(plan_mode).not_to_be_checked()
    await expect(queued.filter(has_text="edit me")).to_contain_text("Plan mode")
    await page.screenshot(path=str(shots / "chat-queue.png"))

    # Edit takes the message back into the composer with its Plan mode; re-sent, it
    # queues again at the tail under a new ID.
    old_id = await queued.filter(has_text="edit me").get_attribute("data-message-id")
    await queued.filter(has_text="edit me").get_by_role("button", name="Edit").click()
    await expect(composer).to_have_value("edit me")
    await expect(composer).to_be_focused()
    await expect(plan_mode).to_be_checked()
    await expect(queued).to_have_count(2)
    await composer.fill("edited plan")
    await composer.press("Control+Enter")
    await expect(queued).to_have_count(3)
    await expect(queued.last).to_contain_text("edited plan")
    await expect(queued.last).to_contain_text("Plan mode")
    assert await queued.last.get_attribute("data-message-id") not in (None, old_id)
    await queued.last.get_by_role("button", name="Delete").click()
    await expect(queued).to_have_count(2)
    await queued.filter(has_text="drop me").get_by_role("button", name="Delete").click()
    await expect(queued).to_have_count(1)
    for action in ("Steer", "Delete"):
        await check_a_stale_queue_click(page, app, action)
    async with held(page, "/message-queue/steer"):  # every queue button waits for it
        await queued.get_by_role("button", name="Steer").click()
        await expect(queued.get_by_role("button", name="Steering…")).to_be_visible()
        await expect_all_disabled(queued.get_by_role("button"), 3)
    await expect(page.get_by_text("Local demo response: replace the objective")).to_be_visible()
    await expect(page.get_by_text("Durable timer · 300s")).to_have_count(0)
    await expect(page.get_by_text("0 queued · 0 steered")).to_be_visible()
    await expect(page.locator(".queue.collapsed")).to_be_visible()
    await expect(page.get_by_text("drop me")).to_have_count(0)
    # The wait the steer interrupted keeps its result, marked interrupted.
    wait_result = page.get_by_test_id("bubble-tool").filter(has_text="durable_wait").last
    await expect(wait_result.get_by_test_id("tool-outcome")).to_have_text("interrupted")
    await expect(wait_result).to_contain_text("the user sent a new message")
    users = page.get_by_test_id("bubble-user").locator("p")
    await expect(users.filter(has_text=re.compile("^replace the objective$"))).to_have_count(1)


async def check_steer_over_an_approval_and_fifo(page: Page) -> None:
    """A steer supersedes a pending approval (the write never runs); two messages
    queued behind a short wait run one turn each, in order, once its timer fires."""
    from playwright.async_api import expect

    composer = page.locator(".composer textarea")
    queued = page.get_by_test_id("queued")
    tools = page.get_by_test_id("bubble-tool")
    await composer.fill('/tool google_docs__create_document {"title":"T","content":"abc"}')
    await composer.press("Control+Enter")
    approval = page.get_by_test_id("approval")
    await expect(approval).to_contain_text("Approve tool: google_docs__create_document")
    await composer.fill("skip the document")
    await composer.press("Control+Enter")
    await queued.get_by_role("button", name="Steer").click()
    await expect(page.get_by_text("Local demo response: skip the document")).to_be_visible()
    await expect(approval).to_have_count(0)
    superseded = tools.filter(has_text="google_docs__create_document")
    await expect(superseded.get_by_test_id("tool-outcome")).to_have_text("interrupted")
    await expect(page.get_by_text("Demo Google Doc")).to_have_count(0)

    await composer.fill("/wait 5 short")
    await composer.press("Control+Enter")
    await expect(page.get_by_text("Durable timer · 5s")).to_be_visible()
    for text in ("first in line", "second in line"):  # queued while the timer runs
        await composer.fill(text)
        await composer.press("Control+Enter")
    second = page.get_by_text("Local demo response: second in line")
    await expect(second).to_be_visible()
    wait_result = tools.filter(has_text="durable_wait").last
    await expect(wait_result.get_by_test_id("tool-outcome")).to_have_text("completed")
    replies = page.get_by_test_id("bubble-assistant").locator("p")
    await expect(replies.filter(has_text=re.compile("in line$"))).to_have_text(
        ["Local demo response: first in line", "Local demo response: second in line"]
    )
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "waiting_for_user_message"
    )


async def check_a_stale_queue_click(page: Page, app: RunningApp, action: str) -> None:
    """The Agent's session consumes a queued message just before the page's click lands:
    the click gets a 404, the page says so calmly (no error) and shows the queue as it is."""
    from playwright.async_api import expect

    composer = page.locator(".composer textarea")
    queued = page.get_by_test_id("queued")
    text = f"taken before {action}"
    await composer.fill(text)
    await composer.press("Control+Enter")
    await expect(queued.filter(has_text=text)).to_have_count(1)
    workflow_id = page.url.rsplit("=", 1)[1]
    path = "steer" if action == "Steer" else "delete"

    async def taken_first(route: Route) -> None:
        message_id = json.loads(route.request.post_data or "{}")["messageId"]
        delete = app.sessions_delete(workflow_id, message_id)
        assert await asyncio.wrap_future(delete)
        await route.continue_()

    await page.route(f"**/message-queue/{path}", taken_first)
    await queued.filter(has_text=text).get_by_role("button", name=action).click()
    notice = page.get_by_test_id("notice")
    await expect(notice).to_have_text(
        "The queued message is no longer pending · the queue is up to date."
    )
    await expect(queued.filter(has_text=text)).to_have_count(0)
    await expect(queued).to_have_count(1)
    await expect(page.locator(".dock .error")).to_have_count(0)
    await page.unroute(f"**/message-queue/{path}")
    await expect(page.get_by_test_id("bubble-user").filter(has_text=text)).to_have_count(0)


async def check_plan_stop_and_clear(page: Page, shots: Path) -> None:
    """A plan that stops early reads Continue plan; the next message is handled in
    planning mode (a ``/tool`` is refused); Continue finishes it; ``/plan-clear``
    removes the card."""
    from playwright.async_api import expect

    composer = page.locator(".composer textarea")
    plan = page.get_by_test_id("plan")
    await page.get_by_label("Plan mode").check()
    await composer.fill("/plan-stop demo")
    await page.get_by_role("button", name="Create plan").click()
    await expect(plan).to_contain_text("Plan · draft")
    await plan.get_by_role("button", name="Execute plan").click()
    await expect(page.get_by_text("I stopped before completing every plan task.")).to_be_visible()
    await expect(plan).to_contain_text("Plan · active")
    await expect(plan).to_contain_text("1/2 completed")
    await expect(plan.get_by_test_id("plan-stopped")).to_be_visible()
    await page.screenshot(path=str(shots / "chat-plan.png"))
    # The next message is handled in planning mode: a tool request is refused and
    # the stopped plan stays as it was.
    refused = page.get_by_text('"tool": "search__web_search"')
    await expect(refused).to_have_count(1)  # the refusal while the draft was discussed
    await composer.fill('/tool search__web_search {"query":"after the stop"}')
    await composer.press("Control+Enter")
    await expect(refused).to_have_count(2)
    await expect(page.get_by_text("Demo search results for 'after the stop'")).to_have_count(0)
    await expect(plan).to_contain_text("Plan · active")
    await expect(plan).to_contain_text("1/2 completed")
    async with held(page, "/plans/execute"):
        await plan.get_by_role("button", name="Continue plan").click()
        await expect(plan.get_by_role("button", name="Requesting…")).to_be_disabled()
    await expect(plan).to_contain_text("Plan · completed")
    await expect(plan).to_contain_text("2/2 completed")
    await expect(plan.get_by_role("button")).to_have_count(0)
    await page.get_by_label("Plan mode").check()
    await composer.fill("/plan-clear")
    await page.get_by_role("button", name="Create plan").click()
    await expect(plan).to_have_count(0)
    await expect(page.get_by_text("I cleared the plan.")).to_be_visible()


async def check_free_text_question_and_scrolling(page: Page) -> None:
    """A free-text question; the dock stays pinned; new content does not pull a reader
    who scrolled up, and the next own message follows the bottom again."""
    from playwright.async_api import expect

    composer = page.locator(".composer textarea")
    await composer.fill("/ask What date?")
    await composer.press("Control+Enter")
    question = page.get_by_test_id("question")
    await expect(question).to_contain_text("What date?")
    answer = question.get_by_placeholder("Type your answer…")
    await expect(answer).to_be_focused()
    submit = question.get_by_role("button", name="Submit answer")
    await expect(submit).to_be_disabled()
    await answer.fill("tomorrow")
    await expect(submit).to_be_enabled()

    await page.set_viewport_size({"width": 1180, "height": 600})
    assert await page.evaluate("document.documentElement.scrollHeight - innerHeight > 400")
    await page.evaluate(SCROLL_TO_TOP)
    await answer.press("Control+Enter")
    await expect(question).to_have_count(0)
    await expect(page.get_by_test_id("bubble-user").last.locator("p")).to_have_text("tomorrow")
    await expect(
        page.get_by_text(re.compile("finished with this result: .*tomorrow"))
    ).to_be_visible()
    await expect(page.get_by_test_id("status")).to_have_attribute(
        "data-status", "waiting_for_user_message"
    )
    assert await page.evaluate("window.scrollY") == 0  # scrolled up: not followed
    dock = await page.locator(".dock").bounding_box()
    assert dock is not None
    assert abs(dock["y"] + dock["height"] - 600) <= 1  # pinned to the viewport bottom

    await composer.fill("follow me")
    await composer.press("Control+Enter")
    await expect(page.get_by_text("Local demo response: follow me")).to_be_visible()
    await page.wait_for_function(AT_BOTTOM)
    await page.set_viewport_size({"width": 1180, "height": 900})


@contextlib.asynccontextmanager
async def held(page: Page, path: str) -> AsyncGenerator[None]:
    """Holds the page's requests to ``path`` until the block ends, so the block can
    look at the page while the mutation is in flight."""
    arrived = asyncio.Event()
    release = asyncio.Event()
    passed = asyncio.Event()

    async def hold(route: Route) -> None:
        arrived.set()
        await release.wait()
        await route.continue_()
        passed.set()

    await page.route(f"**/products/ai-agent{path}", hold)
    try:
        yield
        assert arrived.is_set(), f"no request to {path} was held"
    finally:
        release.set()
        if arrived.is_set():
            await passed.wait()
        await page.unroute(f"**/products/ai-agent{path}")


async def expect_all_disabled(buttons: Locator, count: int) -> None:
    from playwright.async_api import expect

    await expect(buttons).to_have_count(count)
    for index in range(count):
        await expect(buttons.nth(index)).to_be_disabled()


RECORD_TEST_IDS = """() => {
  window.seenTestIds = new Set();
  new MutationObserver(() => {
    for (const element of document.querySelectorAll("[data-testid]")) {
      window.seenTestIds.add(element.dataset.testid);
    }
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""
RECORD_TEST_IDS_FROM_LOAD = f"""document.addEventListener("DOMContentLoaded", () =>
  ({RECORD_TEST_IDS})());"""
SCROLL_TO_TOP = """() => new Promise((resolve) => {
  window.addEventListener("scroll", resolve, { once: true });
  window.scrollTo(0, 0);
})"""
AT_BOTTOM = "document.documentElement.scrollHeight - scrollY - innerHeight < 2"


async def check_refresh_triggers(page: Page) -> None:
    """Focus, online and visibility each refresh the snapshot; with the clock paused,
    only the fallback timer refreshes, once per 8 s."""
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/snapshot?" in r.url else None)
    now = await page.evaluate("Date.now()")
    await page.clock.pause_at(now + 1000)
    for trigger in (
        "window.dispatchEvent(new Event('focus'))",
        "window.dispatchEvent(new Event('online'))",
        "document.dispatchEvent(new Event('visibilitychange'))",
    ):
        async with page.expect_request(re.compile(r"/snapshot\?")):
            await page.evaluate(trigger)
    before = len(requests)
    await page.clock.run_for(7000)
    async with page.expect_request(re.compile(r"/snapshot\?")):
        await page.clock.run_for(1000)
    assert len(requests) == before + 1  # one fallback refresh in 8 s, none before it
