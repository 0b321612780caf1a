"""AgentHost and AgentSessionClient: the same code embedded and against a served engine."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
import pytest
from dex._invocation_context import InvocationContext

from dex_agents import (
    AgentHost,
    AgentSessionClient,
    AgentSessionFlow,
    EmbeddedEngineOptions,
    SessionWaitTimeoutError,
    ToolEffect,
    ToolPolicy,
    WorkerTuning,
    create_agent_session_flow,
)
from dex_agents._host_options import EmbeddedEngine, EmbeddedTransport
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import PrivateDexEngine
from dex_agents.values import FrameworkMessage, empty_agent_usage

TOOLS = ("check_stock", "refund_order")
TOGETHER_WAIT_SECONDS = 20


def _message(text: str, role: str = "assistant") -> FrameworkMessage:
    return FrameworkMessage(role=role, framework_item=json.dumps({"text": text}), text=text)  # type: ignore[arg-type]


class ParallelToolsRunner:
    """One model response asks for every tool of ``TOOLS``; each tool finishes only once all
    of them run at the same time, so tools run one after another fail the turn."""

    def __init__(self) -> None:
        self._running: dict[str, set[str]] = {}
        self._all_running: dict[str, asyncio.Event] = {}

    def build_user_message(self, text: str) -> FrameworkMessage:
        return _message(text, "user")

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted | ToolCallsRequested:
        if not turn.is_resuming:
            calls = [
                DeferredToolCall(f"call-{name}", name, "{}", turn.resolve_tool_policy(name))
                for name in TOOLS
            ]
            return ToolCallsRequested("asked", calls, empty_agent_usage())
        outcomes = []
        for record in turn.tool_calls:
            outcomes.append(f"{record.tool_name}={describe_tool_call_outcome(record)}")
        return TurnCompleted([_message("; ".join(outcomes))], empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        key = f"{call.flow_id}/{call.tool_call.turn_id}"
        running = self._running.setdefault(key, set())
        all_running = self._all_running.setdefault(key, asyncio.Event())
        running.add(call.tool_call.tool_name)
        if running >= set(TOOLS):
            all_running.set()
        try:
            await asyncio.wait_for(all_running.wait(), TOGETHER_WAIT_SECONDS)
        except TimeoutError:
            raise ToolExecutionError("ran alone") from None
        return ToolExecutionResult("ran together")


def _build_flow() -> AgentSessionFlow:
    return create_agent_session_flow(
        ParallelToolsRunner(),
        "HostTestAgent",
        tool_policies={
            "check_stock": ToolPolicy(ToolEffect.READ),
            "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        },
    )


async def _run_turn(sessions: AgentSessionClient, session_id: str) -> str:
    await sessions.start_session(session_id, "refund order 42 if it is in stock")
    snapshot = await sessions.wait_for_turn_or_interrupt(session_id)
    assert [i.tool_name for i in snapshot.pending_interrupts] == ["refund_order"]
    assert await sessions.approve(session_id, snapshot.pending_interrupts[0].interrupt_id)
    snapshot = await sessions.wait_for_turn(session_id, 1)
    reply = snapshot.messages[-1].text
    assert reply is not None
    return reply


EXPECTED_REPLY = "check_stock=ran together; refund_order=ran together"


@pytest.fixture(scope="module")
def served_engine() -> Iterator[PrivateDexEngine]:
    """A `dex-local-engine serve` child process: the host gets only its address."""
    with PrivateDexEngine.start() as engine:
        yield engine


async def test_embedded_host_runs_tool_calls_of_one_response_in_parallel() -> None:
    async with AgentHost(_build_flow()) as host:
        assert host.embedded
        assert await _run_turn(host.client(), "embedded-1") == EXPECTED_REPLY


def _engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "dex-local-engine"]


@pytest.mark.parametrize("placement", ["loop", "thread"])
async def test_the_embedded_engine_runs_on_the_hosts_loop_or_its_own_thread(
    placement: EmbeddedEngine,
) -> None:
    before = len(_engine_threads())
    engine = EmbeddedEngineOptions(placement=placement)
    async with AgentHost(_build_flow(), engine_options=engine) as host:
        assert host.embedded_engine == placement
        assert len(_engine_threads()) - before == (1 if placement == "thread" else 0)
        assert await _run_turn(host.client(), f"placed-{placement}") == EXPECTED_REPLY
    assert len(_engine_threads()) == before


@pytest.mark.parametrize("placement", ["loop", "thread"])
@pytest.mark.parametrize("transport", ["in-process", "grpc"])
async def test_a_turn_runs_over_each_transport_and_the_grpc_port_stays_open(
    placement: EmbeddedEngine, transport: EmbeddedTransport
) -> None:
    from dex_local_engine.in_process import InProcessChannel

    flow = _build_flow()
    engine = EmbeddedEngineOptions(placement=placement, transport=transport)
    async with AgentHost(flow, engine_options=engine) as host:
        channel = vars(host.dex_client)["_channel"]
        assert isinstance(channel, InProcessChannel) == (transport == "in-process")
        assert await _run_turn(host.client(), f"over-{transport}") == EXPECTED_REPLY
        # Other processes and the sync Client still reach the engine by gRPC.
        sync_client = dex.Client(
            host.registry, host.blob_cache, dex.ClientOptions(server_address=host.server_address)
        )
        try:
            assert await asyncio.to_thread(sync_client.health_check)
        finally:
            sync_client.close()


async def test_sessions_in_a_database_file_outlive_the_host(tmp_path: Path) -> None:
    database = tmp_path / "sessions" / "dex.sqlite3"
    async with AgentHost(_build_flow(), database=database) as host:
        assert await _run_turn(host.client(), "kept-1") == EXPECTED_REPLY
    async with AgentHost(_build_flow(), database=database) as host:
        snapshot = await host.client().snapshot("kept-1")
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1
    assert snapshot.messages[-1].text == EXPECTED_REPLY


async def test_the_same_code_runs_against_a_served_engine_by_address(
    served_engine: PrivateDexEngine,
) -> None:
    flow = _build_flow()
    async with AgentHost(flow, server_address=served_engine.server_address) as host:
        assert not host.embedded
        assert host.server_address == served_engine.server_address
        assert await _run_turn(host.client(flow), "served-1") == EXPECTED_REPLY


async def test_dex_server_address_variable_picks_the_server(
    served_engine: PrivateDexEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEX_SERVER_ADDRESS", served_engine.server_address)
    async with AgentHost(_build_flow()) as host:
        assert host.server_address == served_engine.server_address
        assert await _run_turn(host.client(), "from-variable-1") == EXPECTED_REPLY


async def test_worker_only_and_client_only_hosts_split_the_work(
    served_engine: PrivateDexEngine,
) -> None:
    address = served_engine.server_address
    worker_host = AgentHost(_build_flow(), server_address=address, client=False)
    serving = asyncio.create_task(worker_host.serve())
    try:
        async with AgentHost(_build_flow(), server_address=address, worker=False) as client_host:
            assert client_host.worker is None
            # The Worker-only host registers in the background; the client's waits ride it out.
            assert await _run_turn(client_host.client(), "split-1") == EXPECTED_REPLY
        with pytest.raises(RuntimeError, match="no Client"):
            _ = worker_host.dex_client
    finally:
        await worker_host.stop()
        await serving
    assert worker_host.worker is None


def test_sync_code_runs_the_host_on_a_background_loop() -> None:
    with AgentHost(_build_flow()) as host:
        assert host.call(_run_turn(host.client(), "sync-1")) == EXPECTED_REPLY
    with pytest.raises(RuntimeError, match="not running"):
        _ = host.dex_client


async def test_events_iterate_with_resume_tokens_and_waits_time_out_clearly() -> None:
    async with AgentHost(_build_flow()) as host:
        sessions = host.client()
        await _run_turn(sessions, "events-1")
        seen: list[str] = []
        tokens: list[str] = []
        async for item in sessions.events("events-1"):
            seen.append(item.event.type)
            tokens.append(item.resume_token)
            if item.event.type == "turn_completed":
                break
        assert seen[0] == "turn_started"
        assert "interrupt_raised" in seen
        # Resuming after the first event skips it and yields the second.
        async for item in sessions.events("events-1", tokens[0]):
            assert item.resume_token == tokens[1]
            break
        assert await sessions.latest_event_token("events-1") == tokens[-1]
        with pytest.raises(SessionWaitTimeoutError, match="a pending interrupt for nothing"):
            await sessions.wait_for_interrupt(
                "events-1", "nothing", within=timedelta(milliseconds=300)
            )
        messages = [m async for m in sessions.iter_messages("events-1", page_size=1)]
        assert [m.role for m in messages] == ["assistant", "user"]  # newest page first


def test_bad_host_arguments_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="at least one Flow"):
        AgentHost([])
    with pytest.raises(ValueError, match="neither a Worker nor a Client"):
        AgentHost(_build_flow(), worker=False, client=False)
    with pytest.raises(ValueError, match="at least 2"):
        AgentHost(_build_flow(), max_concurrent_tasks=1)
    with pytest.raises(ValueError, match="embedded_engine must be one of loop, thread"):
        AgentHost(_build_flow(), embedded_engine="process")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedded_transport must be one of in-process, grpc"):
        AgentHost(_build_flow(), embedded_transport="socket")  # type: ignore[arg-type]
    pending = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="call\\(\\) is for"):
        AgentHost(_build_flow()).call(pending)
    pending.close()


async def test_an_unreachable_server_fails_start_with_its_address() -> None:
    host = AgentHost(
        _build_flow(),
        server_address="127.0.0.1:1",
        worker_tuning=WorkerTuning(registration_timeout=timedelta(seconds=2)),
    )
    with pytest.raises((ConnectionError, TimeoutError), match=r"127\.0\.0\.1:1"):
        await host.start()


MEMOIZE_SCRIPT = """
import asyncio, sys
import dex._server_protocol as server_protocol
from dex_agents import AgentHost, SdkPatches
from test_host import _build_flow

async def main(memoize):
    patches = SdkPatches(memoize_sdk_version=memoize)
    async with AgentHost(_build_flow(), sdk_patches=patches) as host:
        assert host.worker is not None
    print(getattr(server_protocol.sdk_version, "cache_info", None) is not None)

asyncio.run(main(sys.argv[1] == "on"))
"""


@pytest.mark.parametrize(("setting", "memoized"), [("on", "True"), ("off", "False")])
def test_the_host_memoizes_the_sdk_version_unless_told_not_to(setting: str, memoized: str) -> None:
    # A child process each: the patch is process-wide.
    done = _run_script(MEMOIZE_SCRIPT, setting)
    assert done.stdout.strip() == memoized, done.stderr


def _run_script(script: str, argument: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a child Python next to this file, with ``argument``."""
    return subprocess.run(
        [sys.executable, "-c", script, argument],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).parent,
    )


async def test_send_user_message_and_wait_follows_the_turn_that_takes_the_message() -> None:
    flow = create_agent_session_flow(
        ParallelToolsRunner(),
        "HostWaitAgent",
        tool_policies={name: ToolPolicy(ToolEffect.READ) for name in TOOLS},
    )
    async with AgentHost(flow) as host:
        sessions = host.client()
        await sessions.start_session("wait-1")
        await sessions.wait_for_turn("wait-1", 0)
        first = await sessions.send_user_message_and_wait("wait-1", "one")
        assert (first.event.type, first.event.turn_id) == ("turn_completed", "turn-1")
        second = await sessions.send_user_message_and_wait(
            "wait-1", "two", resume_token=first.resume_token
        )
        assert (second.event.type, second.event.turn_id) == ("turn_completed", "turn-2")
        snapshot = await sessions.snapshot("wait-1")
        assert snapshot.messages[-1].text == EXPECTED_REPLY
        with pytest.raises(ValueError, match="refused"):
            await sessions.send_user_message_and_wait("wait-1", "  ")


class _CountingClient(AgentSessionClient):
    """The public client, counting its snapshot reads."""

    snapshots = 0

    async def snapshot(self, session_id: str) -> Any:
        self.snapshots += 1
        return await super().snapshot(session_id)


async def test_turn_waits_read_a_snapshot_only_at_the_start_and_after_the_turn_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No safety re-check in this test: every snapshot read is one the events asked for.
    monkeypatch.setattr("dex_agents._client._QUIET_RECHECK_SECONDS", 60.0)
    flow = create_agent_session_flow(
        ParallelToolsRunner(),
        "HostEventWaitAgent",
        tool_policies={name: ToolPolicy(ToolEffect.READ) for name in TOOLS},
    )
    async with AgentHost(flow) as host:
        sessions = _CountingClient(host.client().client, flow)
        await sessions.start_session("follow-1")
        # Before StartAgentSession commits the snapshot has no state; its commit is awaited.
        idle = await sessions.wait_for_turn("follow-1", 0)
        assert idle.state is not None
        assert sessions.snapshots <= 2
        for turn in (1, 2):
            sessions.snapshots = 0
            assert await sessions.send_user_message("follow-1", f"message {turn}")
            snapshot = await sessions.wait_for_turn("follow-1", turn)
            # The turn runs 5 Steps and writes several events; the wait reads the state
            # once before and once after its turn_completed Step committed.
            assert 1 <= sessions.snapshots <= 2
            assert snapshot.state is not None
            assert snapshot.state.turn_count == turn
            assert snapshot.messages[-1].text == EXPECTED_REPLY


STREAMS_SCRIPT = """
import asyncio, sys
import dex._pull_worker as pull_worker
from dex_agents import AgentHost, SdkPatches, ToolEffect, ToolPolicy, create_agent_session_flow
from test_host import TOOLS, ParallelToolsRunner

opened = 0
poll = pull_worker.PullStream._poll

async def counting_poll(self):
    global opened
    opened += 1
    return await poll(self)

pull_worker.PullStream._poll = counting_poll

async def main(keep):
    flow = create_agent_session_flow(
        ParallelToolsRunner(),
        "StreamsAgent",
        tool_policies={name: ToolPolicy(ToolEffect.READ) for name in TOOLS},
    )
    async with AgentHost(flow, sdk_patches=SdkPatches(keep_pull_streams=keep)) as host:
        sessions = host.client()
        await sessions.start_session("streams-1")
        ended = await sessions.send_user_message_and_wait("streams-1", "warm up")
        before = opened
        for turn in range(5):
            ended = await sessions.send_user_message_and_wait(
                "streams-1", f"turn {turn}", resume_token=ended.resume_token
            )
            assert ended.event.type == "turn_completed", ended.event
    print(opened - before)

asyncio.run(main(sys.argv[1] == "on"))
"""


def test_the_host_keeps_finished_pull_streams_open_unless_told_not_to() -> None:
    # A child process each: the patch is process-wide. Each turn runs 6 Steps (two tools
    # in parallel) and one RPC; the unpatched SDK opens a stream for about each of them.
    opened: dict[str, int] = {}
    for setting in ("on", "off"):
        done = _run_script(STREAMS_SCRIPT, setting)
        assert done.returncode == 0, done.stderr
        opened[setting] = int(done.stdout.strip())
    assert opened["off"] >= 5 * 4, opened
    # Spares stay open: a few streams while parallel tool Steps grow the pool, then none.
    assert opened["on"] * 2 < opened["off"], opened


async def test_a_tool_step_sends_its_started_event_as_first_output_not_a_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A heartbeat costs the engine a commit; the tool_call_started event is output already.
    beats: list[str] = []
    heartbeat = InvocationContext.heartbeat

    async def counting_heartbeat(self: InvocationContext, *value: object) -> None:
        beats.append(self.step_execution_id.partition("-")[0])
        await heartbeat(self, *value)

    monkeypatch.setattr(InvocationContext, "heartbeat", counting_heartbeat)
    flow = create_agent_session_flow(
        ParallelToolsRunner(),
        "HostBeatAgent",
        tool_policies={name: ToolPolicy(ToolEffect.READ) for name in TOOLS},
    )
    async with AgentHost(flow) as host:
        sessions = host.client()
        await sessions.start_session("beats-1")
        ended = await sessions.send_user_message_and_wait("beats-1", "go")
        assert ended.event.type == "turn_completed"
        events = [e.event async for e in _events_through(sessions, "beats-1", ended.resume_token)]
    # Each model call still beats first; the two tool Steps ran with no heartbeat.
    assert sorted(beats) == ["RunModel", "RunModel"]
    started = [e for e in events if e.type == "tool_call_started"]
    assert sorted(e.step_execution_id.partition("-")[0] for e in started) == ["CallTool"] * 2


async def _events_through(
    sessions: AgentSessionClient, session_id: str, last_token: str
) -> AsyncIterator[Any]:
    async for item in sessions.events(session_id):
        yield item
        if item.resume_token == last_token:
            return
