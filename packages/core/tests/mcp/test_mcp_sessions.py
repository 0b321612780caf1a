"""Lasting MCP sessions: one stdio process per server and Worker, re-opened after a
restart, stdio servers that die with their Worker, stderr that says whose it is, the
TTLs tasks are requested with, and the ``traceparent`` in ``_meta``."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dex_agents import create_agent_session_flow
from dex_agents.mcp import McpHttpServer, McpStdioServer, McpToolSource
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment, poll_until
from dex_agents.testing._mcp_server_2025 import McpLegacyTaskTestServer
from dex_agents.testing._processes import ChildProcess
from dex_agents.testing.mcp_server import read_calls
from dex_agents.tracing import TracingOptions


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent to read its status.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


async def test_a_stdio_server_is_one_process_per_worker_and_restarts_when_it_died(
    stdio_server: McpStdioServer, calls: Path
) -> None:
    source = McpToolSource([stdio_server])
    try:
        await source.list_tools()
        for order in ("1", "2"):
            await source.call_tool("files__lookup", {"order_id": order}, idempotency_key=None)
        first, second = (call["pid"] for call in read_calls(calls))
        os.kill(first, signal.SIGKILL)
        await poll_until(lambda: not _pid_alive(first), description="the server gone")
        # The Worker learns of the death from the pipe's end of file, a moment later. A call
        # sent inside that moment is reported as broken off (it cannot be told from a death
        # during the call), so wait, as a Worker between turns has, for the session to be lost.
        connections = source._connections  # pyright: ignore[reportPrivateUsage]
        await poll_until(
            lambda: connections.pooled(stdio_server) is None, description="the session lost"
        )
        # The next call finds the session lost, opens a new one and is sent there.
        answer = await source.call_tool("files__lookup", {"order_id": "3"}, idempotency_key=None)
    finally:
        await source.aclose()
    third = read_calls(calls)[-1]["pid"]
    assert first == second  # listing and both calls: one process
    assert third != first
    assert answer == "order 3: shipped"


async def test_aclose_stops_the_stdio_servers(stdio_server: McpStdioServer, calls: Path) -> None:
    source = McpToolSource([stdio_server])
    await source.call_tool("files__lookup", {"order_id": "1"}, idempotency_key=None)
    (call,) = read_calls(calls)
    await source.aclose()
    await poll_until(lambda: not _pid_alive(call["pid"]), description="the server stopped")


_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from dex_agents.mcp import McpStdioServer, McpToolSource

    async def main():
        server = McpStdioServer(
            name="files", command=sys.executable,
            args=("-m", "dex_agents.testing.mcp_server", "--log", sys.argv[1]),
        )
        source = McpToolSource([server])
        await source.call_tool("files__lookup", {"order_id": "1"}, idempotency_key=None)
        print("called", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_a_stdio_server_dies_with_its_worker(calls: Path, tmp_path: Path) -> None:
    # A stand-in Worker leading its own process group, SIGKILLed as a whole as the tests'
    # Workers are: the server, in the session the SDK gives it, is not in that group.
    worker = ChildProcess.spawn(
        [sys.executable, "-c", _WORKER, str(calls)], log_path=tmp_path / "worker.log"
    )
    try:
        worker.wait_for_log_line("called", timedelta(seconds=120))
        (call,) = read_calls(calls)
        server_pid = call["pid"]
        assert os.getpgid(server_pid) != worker.pid
        worker.kill()
        gone = await poll_until(
            lambda: not _pid_alive(server_pid),
            description="the stdio server dying with its Worker",
            within=timedelta(seconds=10),
            interval=timedelta(milliseconds=5),
        )
    finally:
        worker.kill()
    assert gone


_NOISY_SERVER = (
    "import sys, time\nprint('warming up', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
)
_NOISY_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from dex_agents.mcp import McpStdioServer, McpToolSource

    async def main():
        noisy = McpStdioServer(name="noisy", command=sys.executable, args=(sys.argv[1],))
        source = McpToolSource([noisy], listing_timeout_seconds=1)
        await source.list_tools()
        await source.aclose()
        print("listed", flush=True)

    asyncio.run(main())
    """
)


async def test_a_stdio_servers_stderr_reaches_the_workers_stderr_prefixed(tmp_path: Path) -> None:
    server = tmp_path / "noisy.py"
    server.write_text(_NOISY_SERVER)
    worker = ChildProcess.spawn(
        [sys.executable, "-c", _NOISY_WORKER, str(server)], log_path=tmp_path / "worker.log"
    )
    try:
        worker.wait_for_log_line("listed", timedelta(seconds=120))
    finally:
        worker.kill()
    assert "[mcp server noisy] warming up" in worker.read_log().splitlines()


async def test_tasks_are_requested_with_the_ttls_of_the_spec(
    calls: Path, release: Path, tmp_path: Path
) -> None:
    with McpLegacyTaskTestServer(
        calls=calls, release=release, process_log=tmp_path / "legacy.log"
    ) as legacy:
        server = McpHttpServer(name="legacy", url=legacy.url)
        default = McpToolSource([server], task_poll_max_interval_seconds=1)
        short = McpToolSource(
            [server], task_wait_timeout_seconds=30, task_poll_max_interval_seconds=1
        )
        release.write_text("go")  # noqa: ASYNC240
        try:
            # call_tool polls a task inside the call: four times the wait timeout.
            for source in (default, short):
                await source.call_tool("legacy__slow_report", {"label": "t"}, idempotency_key=None)
        finally:
            await default.aclose()
            await short.aclose()
    requested = [c["requested_ttl_ms"] for c in read_calls(calls) if c["tool"] == "slow_report"]
    assert requested == [4 * 600 * 1000, 4 * 30 * 1000]


async def test_a_task_polled_by_poll_tool_task_is_requested_for_a_day(
    mcp_agent: Any, calls: Path, release: Path, tmp_path: Path
) -> None:
    with McpLegacyTaskTestServer(
        calls=calls, release=release, process_log=tmp_path / "legacy.log"
    ) as legacy:
        source = McpToolSource(
            [McpHttpServer(name="legacy", url=legacy.url)], task_poll_max_interval_seconds=2
        )
        flow = mcp_agent.build_flow(source, f"McpTtl{uuid.uuid4().hex[:6]}")
        sid = f"mcp-ttl-{uuid.uuid4().hex[:8]}"
        try:
            async with await AgentTestEnvironment.start(
                flows=[flow], worker_in_process=True
            ) as env:
                sessions = AgentSessionTestClient(env.client, flow)
                await sessions.start_session(sid, 'call legacy__slow_report {"label": "d"}')
                await poll_until(
                    lambda: any(c["tool"] == "slow_report" for c in read_calls(calls)),
                    description="the task's tools/call",
                )
                release.write_text("go")  # noqa: ASYNC240
                await sessions.wait_for_completed_turns(sid, 1)
        finally:
            await source.aclose()
    (started,) = [c for c in read_calls(calls) if c["tool"] == "slow_report"]
    assert started["requested_ttl_ms"] == 24 * 3600 * 1000


async def test_every_call_carries_the_traceparent_of_its_execute_tool_span(
    mcp_agent: Any, calls: Path, release: Path, http_process: Any
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    source: McpToolSource = mcp_agent.build_source(str(calls), str(release), http_process.url)
    flow = mcp_agent.build_flow(source)
    traced = create_agent_session_flow(
        flow.runner,
        f"McpTraced{uuid.uuid4().hex[:6]}",
        replace(flow.options, tracing=TracingOptions(tracer_provider=provider)),
    )
    sid = f"mcp-traced-{uuid.uuid4().hex[:8]}"
    try:
        async with await AgentTestEnvironment.start(flows=[traced], worker_in_process=True) as env:
            sessions = AgentSessionTestClient(env.client, traced)
            await sessions.start_session(sid, 'call files__lookup {"order_id": "7"}')
            await sessions.wait_for_completed_turns(sid, 1)
            assert await sessions.send_user_message(sid, 'call tickets__lookup {"order_id": "8"}')
            await sessions.wait_for_completed_turns(sid, 2)
    finally:
        await source.aclose()
    spans = {
        f"{span.context.trace_id:032x}-{span.context.span_id:016x}": span.name
        for span in exporter.get_finished_spans()
    }
    # 00-<trace id>-<span id>-<flags>
    sent = [str(call.get("traceparent"))[3:-3] for call in read_calls(calls)]
    assert [spans.get(traceparent) for traceparent in sent] == [
        "execute_tool files__lookup",
        "execute_tool tickets__lookup",
    ]


def test_the_continuation_keeps_the_session_of_a_task() -> None:
    from dex_agents.mcp._tasks import TaskContinuation

    kept = TaskContinuation("working", None, "session-1")
    assert json.loads(kept.encode()) == {
        "input_key": None,
        "session_id": "session-1",
        "status": "working",
    }
    assert TaskContinuation.decode(kept.encode()) == kept
