"""The UI message stream and SSE routes over real HTTP, against a real engine and Worker."""

from __future__ import annotations

import json
from typing import Any

import httpx

from dex_agents.ui_stream import AGENT_RESUME_TOKEN_HEADER_NAME
from ui_support import UIServer, new_session_id, serve_ui_session


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
