"""Plain SSE and the browser-safe snapshot over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
from ui_support import UIServer, new_session_id, serve_ui_session

from dex_agents.testing import AgentSessionTestClient
from dex_agents.ui_stream import (
    STEP_ONLY_TOOL_CALL_FIELDS,
    encode_ui_resume_token_for_tests,
    open_agent_ui_message_stream,
)


async def read_sse(
    http: httpx.AsyncClient, url: str, *, until: str, headers: dict[str, str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(id, data)`` of each event until one of type ``until``."""
    events: list[tuple[str, dict[str, Any]]] = []
    async with http.stream("GET", url, headers=headers or {}) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        event_id = ""
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                events.append((event_id, data))
                if data["type"] == until:
                    return events
    raise AssertionError(f"the stream ended before {until}: {events}")


async def finished_session(server: UIServer) -> str:
    sid = new_session_id()
    await server.start_session(sid, "hello")
    await AgentSessionTestClient(server.client, server.flow).wait_for_completed_turns(sid, 1)
    return sid


async def test_sse_ids_are_resume_tokens_and_last_event_id_wins(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = await finished_session(server)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            events = await read_sse(http, f"/sessions/{sid}/events", until="turn_completed")
            assert next(data["type"] for _, data in events) == "turn_started"
            first = events[0][1]
            assert set(first) == {"type", "turn_id", "attempt", "step_execution_id", "payload"}
            assert isinstance(first["payload"], str)
            assert json.loads(first["payload"]) == {"sequence": 1}
            # Resume after the first event: Last-Event-ID wins over a query token.
            resumed = await read_sse(
                http,
                f"/sessions/{sid}/events?resumeToken=",
                headers={"last-event-id": events[0][0]},
                until="turn_completed",
            )
            assert resumed == events[1:]
            by_query = await read_sse(
                http, f"/sessions/{sid}/events?resumeToken={events[1][0]}", until="turn_completed"
            )
            assert by_query == events[2:]
            # A token Dex rejects gets a 400 (an EventSource stops on it).
            for forged in ("forged", "-1"):
                refused = await http.get(
                    f"/sessions/{sid}/events", headers={"last-event-id": forged}
                )
                assert refused.status_code == 400, forged
                assert "rejected the resume token" in refused.json()["error"]


async def test_the_snapshot_leaves_out_step_only_fields(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid, "charge")
        await AgentSessionTestClient(server.client, server.flow).wait_for_pending_interrupt(sid)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            snapshot = (await http.get(f"/sessions/{sid}/snapshot")).json()
            assert snapshot["messages"]
            assert all("framework_item" not in m for m in snapshot["messages"])
            assert {c["tool_call_id"] for c in snapshot["tool_calls"]} == {"r1", "w1"}
            for call in snapshot["tool_calls"]:
                assert not STEP_ONLY_TOOL_CALL_FIELDS & set(call)
                assert {"arguments", "status", "effect"} <= set(call)
            assert snapshot["pending_interrupts"][0]["interrupt_id"] == "w1"
            # While the turn is active, the token replays its events.
            events = await read_sse(
                http,
                f"/sessions/{sid}/events?resumeToken={snapshot['resume_token']}",
                until="interrupt_raised",
            )
            assert events[0][1]["type"] == "turn_started"
            assert all(data["turn_id"] == "turn-1" for _, data in events)


async def test_a_ui_token_whose_dex_position_is_rejected_replays_the_active_turn(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        sid = new_session_id()
        await server.start_session(sid, "charge")
        await AgentSessionTestClient(server.client, server.flow).wait_for_pending_interrupt(sid)
        forged = encode_ui_resume_token_for_tests("turn-1", "forged")
        stream = await open_agent_ui_message_stream(
            server.client, server.flow, sid, resume_token=forged
        )
        assert stream is not None
        parts = [p async for p in stream]
        assert parts[0] == {"type": "start", "messageId": "turn-1-assistant"}
        assert parts[-2] == {"type": "finish", "finishReason": "tool-calls"}
