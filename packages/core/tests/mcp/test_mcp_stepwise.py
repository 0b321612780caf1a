"""Stepwise agents calling tools of real MCP servers through tool Steps on the real engine.

The servers log every call with the idempotency key they received, so the tests see
what reached them and how often, also across a Worker SIGKILL.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentToolCallStatus, ToolEffect
from dex_agents.mcp import McpToolSource
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment, poll_until
from dex_agents.testing.mcp_server import McpHttpTestServer, read_calls

FACTORY = "mcp_agent:build_flows"


async def test_stepwise_calls_stdio_and_http_tools_with_the_key_on_the_wire(
    mcp_agent: Any, calls: Path, release: Path, http_process: McpHttpTestServer
) -> None:
    source: McpToolSource = mcp_agent.build_source(str(calls), str(release), http_process.url)
    flow = mcp_agent.build_flow(source, f"McpInProcess{uuid.uuid4().hex[:6]}")
    session_id = f"mcp-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        texts = [
            'call files__lookup {"order_id": "7"}',
            'call tickets__set_value {"key": "a", "value": "1"}',
            'call files__count_up {"to": 2}',
            'call mcp_read_resource {"server": "tickets", "uri": "note://readme"}',
        ]
        await sessions.start_session(session_id, texts[0])
        for turns, text in enumerate(texts, start=1):
            if turns > 1:
                assert await sessions.send_user_message(session_id, text)
            await sessions.wait_for_completed_turns(session_id, turns)
        # An unannotated tool is unclassified: it asks for approval first.
        assert await sessions.send_user_message(session_id, 'call tickets__send_email {"to": "a"}')
        (approval,) = await sessions.wait_for_pending_interrupts(session_id, 1)
        waiting = (await sessions.snapshot(session_id)).tool_calls[0]
        assert await sessions.approve(session_id, approval.interrupt_id)
        snapshot = await sessions.wait_for_completed_turns(session_id, len(texts) + 1)
        events = await sessions.read_events(
            session_id,
            until=lambda seen: sum(e.type == "tool_call_finished" for e in seen) == 5,
            description="five finished tool calls",
        )

    replies = [m.text for m in snapshot.messages if m.role == "assistant" and m.text]
    assert replies[:3] == [
        "files__lookup: order 7: shipped",
        "tickets__set_value: a = 1",
        "files__count_up: counted to 2",
    ]
    assert '"text": "Read me first."' in replies[3]
    assert replies[4] == "tickets__send_email: sent to a"
    assert waiting.effect is ToolEffect.UNCLASSIFIED
    assert waiting.requires_approval
    finished = [
        (e.turn_id, json.loads(e.payload)) for e in events if e.type == "tool_call_finished"
    ]
    keys = {p["tool_name"]: f"{session_id}/{turn}/{p['tool_call_id']}" for turn, p in finished}
    assert [(c["tool"], c["idempotency_key"]) for c in read_calls(calls)] == [
        ("lookup", keys["files__lookup"]),
        ("set_value", keys["tickets__set_value"]),
        ("count_up", keys["files__count_up"]),
        ("send_email", keys["tickets__send_email"]),
    ]
    progress = [json.loads(e.payload) for e in events if e.type == "mcp.tool_progress"]
    assert [p["progress"] for p in progress] == [1, 2]
    assert all(p["tool_name"] == "files__count_up" for p in progress)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tool", "status", "runs"),
    [
        # A non-idempotent write never runs twice: the call is outcome_unknown.
        ("files__hold", AgentToolCallStatus.OUTCOME_UNKNOWN, 1),
        # An idempotent write runs again with the same key and succeeds.
        ("tickets__hold", AgentToolCallStatus.SUCCEEDED, 2),
    ],
)
async def test_sigkill_of_the_worker_mid_call_follows_the_effect(
    tool: str,
    status: AgentToolCallStatus,
    runs: int,
    mcp_agent: Any,
    calls: Path,
    release: Path,
    http_process: McpHttpTestServer,
    worker_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    source: McpToolSource = mcp_agent.build_source(str(calls), str(release), http_process.url)
    flow = mcp_agent.build_flow(source)
    session_id = f"mcp-kill-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow]) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        first = env.start_worker_process(
            log_path=tmp_path / "first.log", arguments=[FACTORY], environment=worker_environment
        )
        await sessions.start_session(session_id, f'call {tool} {{"label": "x"}}')
        await poll_until(
            lambda: any(c["tool"] == "hold" for c in read_calls(calls)),
            description="the hold call reaching the server",
            within=timedelta(seconds=120),
        )
        first.kill()
        release.write_text("go")  # noqa: ASYNC240
        env.start_worker_process(
            log_path=tmp_path / "second.log", arguments=[FACTORY], environment=worker_environment
        )
        await sessions.wait_for_completed_turns(session_id, 1)
        events = await sessions.read_events(
            session_id,
            until=lambda seen: any(e.type == "tool_call_finished" for e in seen),
            description="the finished hold call",
        )

    (turn_id, finished) = next(
        (e.turn_id, json.loads(e.payload)) for e in events if e.type == "tool_call_finished"
    )
    assert finished["status"] == status.value
    holds = [c for c in read_calls(calls) if c["tool"] == "hold"]
    assert len(holds) == runs
    assert {c["idempotency_key"] for c in holds} == {
        f"{session_id}/{turn_id}/{finished['tool_call_id']}"
    }
