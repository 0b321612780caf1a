"""A Worker SIGKILL mid-MCP-call and mid-MCP-task, with real Worker child processes.

The stdio server of the killed Worker dies with it, so a held call never finishes after
the kill and the retry on the next Worker never overlaps it. A task that
server-everything keeps in the MCP session of the killed Worker is polled by the next
Worker on that session (by its ``Mcp-Session-Id``) and completes.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentToolCallStatus
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    poll_until,
    read_step_history,
)
from dex_agents.testing.mcp_reference import EverythingHttpServer
from dex_agents.testing.mcp_server import read_calls

FLOWS = Path(__file__).resolve().parent.parent / "worker_flows"

FACTORY = "mcp_reference_agent:build_flows"
RESEARCH = "everything__simulate-research-query"


def _finished(events: Any) -> list[str]:
    return [json.loads(e.payload)["status"] for e in events if e.type == "tool_call_finished"]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def reference_environment(
    mcp_reference_agent: Any, everything_http: EverythingHttpServer, calls: Path, release: Path
) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH")])),
        mcp_reference_agent.URL_VARIABLE: everything_http.url,
        mcp_reference_agent.CALLS_VARIABLE: str(calls),
        mcp_reference_agent.RELEASE_VARIABLE: str(release),
    }


def _flow(mcp_reference_agent: Any, url: str, calls: Path, release: Path) -> Any:
    return mcp_reference_agent.build_flow(
        mcp_reference_agent.build_source(url, str(calls), str(release))
    )


@pytest.mark.slow
async def test_a_stdio_server_dies_with_its_killed_worker_and_the_retry_never_overlaps(
    mcp_reference_agent: Any,
    everything_http: EverythingHttpServer,
    calls: Path,
    release: Path,
    reference_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    flow = _flow(mcp_reference_agent, everything_http.url, calls, release)
    sid = f"mcp-stdio-kill-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow]) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        first = env.start_worker_process(
            log_path=tmp_path / "first.log", arguments=[FACTORY], environment=reference_environment
        )
        await sessions.start_session(sid, 'call files__hold {"label": "x"}')
        (held,) = await poll_until(
            lambda: [c for c in read_calls(calls) if c["tool"] == "hold"] or None,
            description="the hold call reaching the stdio server",
            within=timedelta(seconds=120),
        )
        first.kill()
        server_gone = await poll_until(
            lambda: not _pid_alive(held["pid"]),
            description="the killed Worker's stdio server dying",
            within=timedelta(seconds=10),
            interval=timedelta(milliseconds=5),
        )
        # Released only now: a server that outlived its Worker would finish the call.
        release.write_text("go")  # noqa: ASYNC240
        env.start_worker_process(
            log_path=tmp_path / "second.log", arguments=[FACTORY], environment=reference_environment
        )
        await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")

    assert server_gone
    holds = [c for c in read_calls(calls) if c["tool"] == "hold"]
    finished = [c for c in read_calls(calls) if c["tool"] == "hold_finished"]
    assert len(holds) == 2  # the idempotent write, sent again by the next Worker
    assert holds[0]["idempotency_key"] == holds[1]["idempotency_key"]
    assert [c["pid"] for c in finished] == [holds[1]["pid"]]  # the first never finished
    assert _finished(events) == ["succeeded"]


def _waiting(snapshot: Any) -> bool:
    return any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in snapshot.tool_calls)


@pytest.mark.slow
async def test_an_http_task_of_server_everything_completes_across_a_worker_sigkill(
    mcp_reference_agent: Any,
    everything_http: EverythingHttpServer,
    calls: Path,
    release: Path,
    reference_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    flow = _flow(mcp_reference_agent, everything_http.url, calls, release)
    sid = f"mcp-task-kill-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow]) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        first = env.start_worker_process(
            log_path=tmp_path / "first.log", arguments=[FACTORY], environment=reference_environment
        )
        await sessions.start_session(sid, f'call {RESEARCH} {{"topic": "tides"}}')
        started = await sessions.wait_for_snapshot(
            sid, _waiting, description="the research task is started", within=timedelta(minutes=2)
        )
        first.kill()
        env.start_worker_process(
            log_path=tmp_path / "second.log", arguments=[FACTORY], environment=reference_environment
        )
        done = await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")
        history = await read_step_history(env.server_address, sid)

    record = started.tool_calls[0]
    assert record.task_id is not None
    assert record.input_continuation is not None  # the session the task is bound to
    assert _finished(events) == ["succeeded"], [(e.type, e.payload[:300]) for e in events]
    assert done.messages[-1].text.startswith(f"{RESEARCH}: # Research Report: tides")
    assert executed_step_types(history).count("CallTool") == 1
