"""``resolve_agent_tool_approval``: one approval from an endpoint of the application's own,
while a stream opened with ``finish_when_awaiting_approval=False`` stays open."""

from __future__ import annotations

import asyncio
from typing import Any

from ui_support import new_session_id, serve_ui_session

from dex_agents.testing import AgentSessionTestClient
from dex_agents.ui_stream import open_agent_ui_message_stream, resolve_agent_tool_approval
from dex_agents.values import AgentSessionStartInput


async def test_one_approval_from_an_own_endpoint_reaches_the_open_stream(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        client, flow = server.client, server.flow
        sid = new_session_id()
        await client.start_flow(flow, sid, AgentSessionStartInput(initial_message="charge"))
        sessions = AgentSessionTestClient(client, flow)
        interrupt = await sessions.wait_for_pending_interrupt(sid, "charge")
        assert interrupt.interrupt_id == "w1"

        stream = await open_agent_ui_message_stream(
            client, flow, sid, finish_when_awaiting_approval=False
        )
        assert stream is not None
        parts: list[dict[str, Any]] = []

        async def read_until_finish() -> None:
            async for part in stream:
                parts.append(part)
                if part["type"] == "finish":
                    return

        reading = asyncio.create_task(read_until_finish())
        # Not applied: an unknown ID, and a decision bound to a turn that is not active.
        assert not await resolve_agent_tool_approval(client, flow, sid, "nope", True)
        assert not await resolve_agent_tool_approval(
            client, flow, sid, "w1", True, turn_id="turn-7"
        )
        await asyncio.sleep(0.3)
        assert not reading.done()  # the stream waits for the answer instead of finishing
        assert server.runner.charges == []

        assert await resolve_agent_tool_approval(client, flow, sid, "w1", True, turn_id="turn-1")
        await asyncio.wait_for(reading, 60)
        shown = [
            p for p in parts if p["type"] not in ("data-agent-resume-token", "data-agent-event")
        ]
        assert {"type": "tool-approval-response", "approvalId": "w1", "approved": True} in shown
        assert shown[-1] == {"type": "finish", "finishReason": "stop"}
        assert len(server.runner.charges) == 1
        # Answered already: nothing pending is left to resolve.
        assert not await resolve_agent_tool_approval(client, flow, sid, "w1", True)


async def test_a_rejection_carries_its_reason(engine) -> None:
    async with serve_ui_session(engine.address) as server:
        client, flow = server.client, server.flow
        sid = new_session_id()
        await client.start_flow(flow, sid, AgentSessionStartInput(initial_message="charge"))
        sessions = AgentSessionTestClient(client, flow)
        await sessions.wait_for_pending_interrupt(sid, "charge")
        assert await resolve_agent_tool_approval(
            client, flow, sid, "w1", False, reason="too expensive"
        )
        snapshot = await sessions.wait_for_completed_turns(sid, 1)
        assert snapshot.messages[-1].text == "Done: lookup succeeded, charge rejected."
        assert server.runner.charges == []
