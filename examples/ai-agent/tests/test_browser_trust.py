"""Other sites against the app, in headless Chromium: a hostile page served by a second
local server on another port posts to the app (a no-cors fetch, a plain HTML form) and
frames it (clickjacking); a DNS rebinding is simulated with Chromium's
``--host-resolver-rules``. Each is refused, and the app's state shows nothing of it."""

from __future__ import annotations

import html
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from app_server import RunningApp
from browser_page import app_page_url, chromium_page, needs_chromium

from dex_agents.testing import find_free_loopback_ports

pytestmark = needs_chromium
API = "/products/ai-agent"


class HostileSite:
    """A second local server, on another port: the page another site would serve."""

    def __init__(self, page: str) -> None:
        body = page.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                del format, args

        (port,) = find_free_loopback_ports(1)
        self.url = f"http://127.0.0.1:{port}/"
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hostile_page(app: str, workflow_id: str) -> str:
    start = json.dumps({"workflowId": "hostile-start", "mcpEnabled": False})
    message = json.dumps({"workflowId": workflow_id, "content": "injected by fetch"})
    # A text/plain form posts `name=value`: together, a JSON body.
    form_field = json.dumps({"workflowId": workflow_id, "content": "injected by form", "x": ""})
    name = html.escape(form_field[:-2], quote=True)
    return f"""<!doctype html><html><body>
<h1>Win a prize</h1>
<script>
window.attacks = Promise.all([
  fetch({json.dumps(app + API + "/start")}, {{method: "POST", mode: "no-cors",
    headers: {{"content-type": "text/plain"}}, body: {json.dumps(start)}}}),
  fetch({json.dumps(app + API + "/messages")}, {{method: "POST", mode: "no-cors",
    headers: {{"content-type": "text/plain"}}, body: {json.dumps(message)}}}),
]).then(() => "sent", (error) => String(error));
</script>
<form id="prize" method="post" enctype="text/plain" action="{app}{API}/messages">
<input type="hidden" name="{name}" value='"}}'>
<button type="submit">Claim</button></form>
<iframe id="frame" width="800" height="600" onload="this.dataset.loaded = 1"
  src="{app}{API}/?workflowId={workflow_id}"></iframe>
</body></html>"""


@pytest.fixture
def agent(running_app: RunningApp) -> str:
    """An Agent with a write waiting for approval: what a hostile page wants."""
    workflow_id = str(uuid.uuid4())
    with httpx.Client(
        base_url=running_app.base_url, headers=running_app.csrf_headers, timeout=30
    ) as client:
        body = {
            "workflowId": workflow_id,
            "enabledMcpServers": ["slack"],
            "enabledTools": ["slack__post_message"],
        }
        assert client.post(f"{API}/start", json=body).status_code == 200
        post = '/tool slack__post_message {"channel":"#general","message":"hi"}'
        message = {"workflowId": workflow_id, "content": post}
        assert client.post(f"{API}/messages", json=message).status_code == 200
    return workflow_id


async def read_snapshot(app: RunningApp, workflow_id: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
        return await client.get(f"{API}/snapshot", params={"workflowId": workflow_id})


async def test_a_hostile_page_can_neither_post_nor_frame_the_app(
    running_app: RunningApp, agent: str
) -> None:
    from playwright.async_api import expect

    site = HostileSite(hostile_page(running_app.base_url, agent))
    statuses: dict[str, list[int]] = {}
    try:
        async with chromium_page() as page:
            # The Agent waits for approval: its own page shows Approve.
            await page.goto(f"{app_page_url(running_app.base_url)}?workflowId={agent}")
            approve = page.get_by_test_id("approval").get_by_role("button", name="Approve")
            await expect(approve).to_be_visible()

            def record(response: object) -> None:
                from playwright.async_api import Response

                assert isinstance(response, Response)
                if response.request.method == "POST":
                    path = response.url.split(API, 1)[-1]
                    statuses.setdefault(path, []).append(response.status)

            page.on("response", record)
            sent: list[str] = []
            page.on(
                "request",
                lambda r: sent.append(r.url.split(API, 1)[-1]) if r.method == "POST" else None,
            )
            await page.goto(site.url)
            # The refusals carry Cross-Origin-Resource-Policy: same-origin, so the page
            # does not even get its opaque answer.
            assert await page.evaluate("window.attacks") == "TypeError: Failed to fetch"
            await page.wait_for_function("document.getElementById('frame').dataset.loaded")
            # Clickjacking: the app refuses to be framed (frame-ancestors 'none'), so the
            # frame holds no page of the app and no Approve button to trick a click onto.
            frame = page.frame_locator("#frame")
            await page.wait_for_timeout(1000)  # a framed page would have rendered by now
            await expect(frame.get_by_role("button", name="Approve")).to_have_count(0)
            await expect(frame.locator("#root")).to_have_count(0)
            # The plain HTML form: the browser navigates to the app's refusal.
            async with page.expect_navigation() as navigation:
                await page.get_by_role("button", name="Claim").click()
            response = await navigation.value
            assert response is not None
            assert response.status == 403
            assert "cross-origin request" in await page.content()
    finally:
        site.close()

    # Both fetches and the form were sent; the form's answer is the only one the browser
    # shows (the fetches' answers are blocked as well), and the state shows none took.
    assert sorted(sent) == ["/messages", "/messages", "/start"]
    assert statuses == {"/messages": [403]}
    value = (await read_snapshot(running_app, agent)).json()
    assert all("injected" not in (m["text"] or "") for m in value["messages"])
    missing = await read_snapshot(running_app, "hostile-start")
    assert missing.status_code == 404  # the cross-origin /start created nothing


async def test_a_dns_rebinding_reaches_no_route(running_app: RunningApp, agent: str) -> None:
    """``rebind.test`` resolves to the app's address, as a rebinding attacker's name
    would: the app answers every request under that name with a 400."""
    port = running_app.base_url.rsplit(":", 1)[1]
    rebound = f"http://rebind.test:{port}"
    rules = "--host-resolver-rules=MAP rebind.test 127.0.0.1"
    async with chromium_page(args=[rules]) as page:
        response = await page.goto(f"{rebound}{API}/?workflowId={agent}")
        assert response is not None
        assert response.status == 400
        assert "Host 'rebind.test:" in await page.content()
        # The attacker's script runs in the rebound origin: every read and write fails.
        results = await page.evaluate(
            """async ([workflowId]) => {
              const read = await fetch(`/products/ai-agent/snapshot?workflowId=${workflowId}`);
              const approve = await fetch("/products/ai-agent/tool-approvals", {
                method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({workflowId, callId: "any", approved: true}),
              });
              return [read.status, approve.status, await read.text()];
            }""",
            [agent],
        )
    assert results[0] == 400
    assert results[1] == 400
    assert "pending_interrupts" not in results[2]
    value = (await read_snapshot(running_app, agent)).json()
    assert value["agent_status"] == "waiting_for_tool_approval"  # nothing was approved
