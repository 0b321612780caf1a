"""The UI message stream and SSE routes over real HTTP, against a real engine and Worker."""

from __future__ import annotations

import json
from typing import Any

import httpx
from ui_support import UIServer, new_session_id, serve_ui_session

from dex_agents.testing import AgentSessionTestClient
from dex_agents.ui_stream import AGENT_RESUME_TOKEN_HEADER_NAME


def parse_ui_stream(body: str) -> list[dict[str, Any]]:
    frames = [frame for frame in body.split("\n\n") if frame.strip()]
    assert frames[-1] == "data: [DONE]", frames[-1]
    parts: list[dict[str, Any]] = []
    for frame in frames[:-1]:
        assert frame.startswith("data: "), frame
        parts.append(json.loads(frame[len("data: ") :]))
    return parts


def visible(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in parts if p["type"] not in ("data-agent-resume-token", "data-agent-event")]


def user_message(text: str) -> dict[str, Any]:
    return {"id": f"u-{text}", "role": "user", "parts": [{"type": "text", "text": text}]}


async def post_chat(server: UIServer, session_id: str, messages: list[Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        return await http.post("/api/chat", json={"id": session_id, "messages": messages})


async def test_a_sent_message_streams_its_turn_with_a_token_after_every_part(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid)
        response = await post_chat(server, sid, [user_message("hello")])
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        parts = parse_ui_stream(response.text)
        shown = visible(parts)
        assert shown[0] == {"type": "start", "messageId": "turn-1-assistant"}
        assert [p["type"] for p in shown[1:3]] == ["start-step", "text-start"]
        text = "".join(p["delta"] for p in shown if p["type"] == "text-delta")
        assert text == "Hello there"
        assert [p["type"] for p in shown[-3:]] == ["text-end", "finish-step", "finish"]
        assert shown[-1]["finishReason"] == "stop"
        for index, part in enumerate(parts):
            if part["type"] != "data-agent-resume-token":
                following = parts[index + 1]
                assert following["type"] == "data-agent-resume-token"
                assert following["transient"] is True
        assert (sid, "write") in server.access.checks


def approve_all(parts: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    """The assistant UIMessage a browser sends back after approving every request."""
    approvals = [p for p in parts if p["type"] == "tool-approval-request"]
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [
            {
                "type": "dynamic-tool",
                "toolName": "charge",
                "toolCallId": a["toolCallId"],
                "state": "approval-responded",
                "input": {},
                "approval": {"id": a["approvalId"], "approved": True},
            }
            for a in approvals
        ],
    }


async def test_an_approval_finishes_with_tool_calls_and_the_answer_streams_on(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid)
        first = visible(
            parse_ui_stream((await post_chat(server, sid, [user_message("charge")])).text)
        )
        types = [p["type"] for p in first]
        assert types.count("tool-input-available") == 2
        inputs = {p["toolCallId"]: p for p in first if p["type"] == "tool-input-available"}
        assert inputs["w1"]["input"] == {"cents": 500}
        assert inputs["w1"]["dynamic"] is True
        assert inputs["w1"]["toolName"] == "charge"
        assert {"type": "tool-approval-request", "approvalId": "w1", "toolCallId": "w1"} in first
        outputs = [p for p in first if p["type"] == "tool-output-available"]
        assert outputs == [
            {
                "type": "tool-output-available",
                "toolCallId": "r1",
                "output": "book: in stock",
                "dynamic": True,
            }
        ]
        assert first[-1] == {"type": "finish", "finishReason": "tool-calls"}
        assert server.runner.charges == []

        answer = approve_all(first, "turn-1-assistant")
        second = visible(
            parse_ui_stream((await post_chat(server, sid, [user_message("charge"), answer])).text)
        )
        assert {"type": "tool-approval-response", "approvalId": "w1", "approved": True} in second
        assert {
            "type": "tool-output-available",
            "toolCallId": "w1",
            "output": "charged 500",
            "dynamic": True,
        } in second
        text = "".join(p["delta"] for p in second if p["type"] == "text-delta")
        assert text == "Done: lookup succeeded, charge succeeded."
        assert "start" not in [p["type"] for p in second]  # same message, continued
        assert second[-1] == {"type": "finish", "finishReason": "stop"}
        assert len(server.runner.charges) == 1

        # The same answer again (a stale tab) is not applied; the call shows its outcome.
        again = visible(parse_ui_stream((await post_chat(server, sid, [answer])).text))
        assert again[0]["type"] == "tool-output-available"
        assert again[0]["toolCallId"] == "w1"
        assert again[-1] == {"type": "finish", "finishReason": "other"}
        assert len(server.runner.charges) == 1


async def test_a_decision_bound_to_another_turn_is_not_applied(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid)
        first = visible(
            parse_ui_stream((await post_chat(server, sid, [user_message("charge")])).text)
        )
        stale = approve_all(first, "turn-7-assistant")
        after = visible(parse_ui_stream((await post_chat(server, sid, [stale])).text))
        assert after[0]["type"] == "tool-output-error"
        assert after[0]["toolCallId"] == "w1"
        assert after[-1] == {"type": "finish", "finishReason": "tool-calls"}
        snapshot = await server.client.invoke_rpc(server.flow.get_agent_snapshot, sid)
        assert [i.interrupt_id for i in snapshot.pending_interrupts] == ["w1"]


async def test_reconnect_replays_the_turn_or_continues_after_the_token(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid, "slow")
        await server.runner.reached_gate.wait()
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            listing = (await http.get(f"/api/chat/{sid}")).json()
            assert [m["role"] for m in listing["messages"]] == ["user"]
            token = listing["resumeToken"]
            assert isinstance(token, str)
            async with http.stream(
                "GET", f"/api/chat/{sid}/stream", headers={AGENT_RESUME_TOKEN_HEADER_NAME: token}
            ) as stream:
                assert stream.status_code == 200
                received: list[dict[str, Any]] = []
                lines = stream.aiter_lines()
                async for line in lines:
                    if line.startswith("data: {"):
                        received.append(json.loads(line[6:]))
                    if any(p["type"] == "text-delta" for p in received) and (
                        received[-1]["type"] == "data-agent-resume-token"
                    ):
                        break
            # The connection is gone mid-turn; the last token continues exactly after it.
            last_token = received[-1]["data"]
            server.runner.release.set()
            replay = visible(
                parse_ui_stream(
                    (
                        await http.get(
                            f"/api/chat/{sid}/stream",
                            headers={AGENT_RESUME_TOKEN_HEADER_NAME: last_token},
                        )
                    ).text
                )
            )
            assert replay[0] == {"type": "start", "messageId": "turn-1-assistant"}
            assert "".join(p["delta"] for p in replay if p["type"] == "text-delta") == (
                "part one. part two."
            )
            assert replay[-1] == {"type": "finish", "finishReason": "stop"}
            # No active turn: the reconnect route answers 204.
            assert (await http.get(f"/api/chat/{sid}/stream")).status_code == 204
            listing = (await http.get(f"/api/chat/{sid}")).json()
            assert listing["resumeToken"] is None
            assistant = listing["messages"][-1]
            assert assistant["id"] == "turn-1-assistant"
            assert assistant["parts"][-1] == {
                "type": "text",
                "text": "part one. part two.",
                "state": "done",
            }


async def test_exact_continuation_repeats_no_part(engine) -> None:
    from dex_agents.ui_stream import open_agent_ui_message_stream

    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid, "charge")
        await AgentSessionTestClient(server.client, server.flow).wait_for_pending_interrupt(sid)
        full = await _collect(await open_agent_ui_message_stream(server.client, server.flow, sid))
        # Cut after every part in turn and continue: the parts line up with the full run.
        tokens = [i for i, p in enumerate(full) if p["type"] == "data-agent-resume-token"]
        for cut in tokens:
            stream = await open_agent_ui_message_stream(
                server.client,
                server.flow,
                sid,
                resume_token=full[cut]["data"],
                continue_after_resume_token=True,
            )
            assert stream is not None
            rest = await _collect(stream)
            assert visible(full[: cut + 1]) + visible(rest) == visible(full), cut


async def _collect(stream: Any) -> list[dict[str, Any]]:
    assert stream is not None
    return [part async for part in stream]


async def test_routes_call_the_authorization_callback(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            assert (await http.get("/api/chat/forbidden-1")).status_code == 403
            assert (await http.get("/sessions/forbidden-1/events")).status_code == 403
            refused = await http.post(
                "/api/chat", json={"id": "forbidden-1", "messages": [user_message("hi")]}
            )
            assert refused.status_code == 403
            assert (await http.post("/api/chat", content=b"{")).status_code == 400
            assert (await http.get("/api/chat/no-such-session")).status_code == 404
        assert ("forbidden-1", "read") in server.access.checks
        assert ("forbidden-1", "write") in server.access.checks
