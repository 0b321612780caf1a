"""A real EventSource in headless Chromium follows the SSE stream across a server-side drop."""

from __future__ import annotations

import pytest
from browser_tools import chromium_page, chromium_skip_reason
from ui_support import new_session_id, serve_ui_session

from dex_agents.testing import AgentSessionTestClient

PAGE = """<!doctype html>
<html><body><pre id="log"></pre><script>
const sessionId = new URLSearchParams(location.search).get("session");
window.received = [];
window.opened = 0;
window.done = false;
(async () => {
  const { resume_token } = await (await fetch(`/sessions/${sessionId}/snapshot`)).json();
  const source = new EventSource(
    `/sessions/${sessionId}/events?resumeToken=${encodeURIComponent(resume_token)}`);
  source.onopen = () => { window.opened += 1; };
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    window.received.push({ id: message.lastEventId, type: event.type,
                           payload: JSON.parse(event.payload) });
    document.getElementById("log").textContent += event.type + "\\n";
    if (event.type === "turn_completed") { window.done = true; source.close(); }
  };
})();
</script></body></html>
"""


async def test_an_event_source_resumes_through_last_event_id_after_a_drop(engine) -> None:
    reason = chromium_skip_reason()
    if reason:
        pytest.skip(reason)
    async with serve_ui_session(engine.address, static={"/chat": PAGE}) as server:
        sid = new_session_id()
        await server.start_session(sid, "slow")
        await server.runner.reached_gate.wait()
        # Cut the first event connection after "retry", turn_started and the first delta.
        server.cut.arm("GET", "/events", chunks=3)
        async with chromium_page() as page:
            await page.goto(f"{server.base_url}/chat?session={sid}")
            await server.cut.cut.wait()
            server.runner.release.set()
            await page.wait_for_function("window.done === true", timeout=60_000)
            received = await page.evaluate("window.received")
            opened = await page.evaluate("window.opened")
            log = await page.inner_text("#log")
        await AgentSessionTestClient(server.client, server.flow).wait_for_completed_turns(sid, 1)

    types = [event["type"] for event in received]
    assert types[0] == "turn_started"
    assert types[-1] == "turn_completed"
    assert opened == 2  # the drop, then the automatic reconnect
    ids = [event["id"] for event in received]
    assert len(ids) == len(set(ids))  # nothing repeated
    text = "".join(e["payload"]["text"] for e in received if e["type"] == "text_delta")
    assert text == "part one. part two."
    assert log.splitlines() == types
