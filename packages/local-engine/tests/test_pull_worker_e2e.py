"""End to end with the unmodified Dex SDK: Client, pull Workers, Streams, RPCs and errors."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import engine_app
import pytest
from conftest import App, ThreadWorker, WorkerProcess
from dex import (
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowStatus,
    RpcLockConflictError,
    WorkerInvocationError,
)

from dex_local_engine import LocalEngine


def test_flow_runs_steps_rpcs_and_streams(app: App, worker: ThreadWorker) -> None:
    client = app.client
    assert client.health_check()
    run_id = client.start_flow(app.agent, "agent-1", "hi")
    assert run_id
    with pytest.raises(FlowAlreadyStartedError):
        client.start_flow(app.agent, "agent-1", "again")
    message = client.read_stream("agent-1", app.agent.events, timeout=timedelta(seconds=10))
    assert message.value == "hello-from-AgentStart-1"
    assert message.source == "#AgentStart-1"
    assert client.invoke_rpc(app.agent.bump, "agent-1", 15) == 15
    result = client.wait_for_flow("agent-1")
    assert result.status is FlowStatus.COMPLETED
    assert [c.decode(str) for c in result.completions] == ["hi|msgs=['bumped-15']|counter=15"]
    info = client.describe_flow("agent-1")
    assert info.flow_type == "AgentFlow"
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(app.agent.bump, "agent-1", 1)
    with pytest.raises(FlowNotFoundError):
        client.wait_for_flow("no-such-flow")


def test_rpc_errors_map_to_sdk_exceptions(app: App, worker: ThreadWorker) -> None:
    client = app.client
    client.start_flow(app.agent, "agent-2", "x")
    with pytest.raises(WorkerInvocationError) as failure:
        client.invoke_rpc(app.agent.boom, "agent-2", "boom")
    assert failure.value.worker_error_type == "builtins.ValueError"
    assert failure.value.worker_error_detail == "boom!"

    # Two RPCs locking the same Attribute: whichever comes second fails fast.
    conflicts: list[RpcLockConflictError] = []
    others: list[BaseException] = []

    def slow() -> None:
        for _ in range(20):
            try:
                client.invoke_rpc(app.agent.slow_bump, "agent-2", 0.5)
                return
            except RpcLockConflictError as error:
                conflicts.append(error)
            except BaseException as error:  # collected for the assertion below
                others.append(error)
                return

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 10
    while not conflicts and time.monotonic() < deadline:
        try:
            client.invoke_rpc(app.agent.locked_peek, "agent-2")
            time.sleep(0.02)
        except RpcLockConflictError as error:
            conflicts.append(error)
    thread.join()
    assert conflicts
    assert others == []


def test_killed_worker_costs_one_attempt_and_keeps_its_checkpoint(
    app: App, engine: LocalEngine
) -> None:
    first = WorkerProcess(engine.address)
    try:
        app.client.start_flow(app.long, "long-1", 12)
        time.sleep(1.6)  # a few heartbeats in
        first.kill()
    finally:
        first.kill()
    second = WorkerProcess(engine.address)
    try:
        result = app.client.wait_for_flow("long-1")
    finally:
        second.stop()
    assert result.status is FlowStatus.COMPLETED
    output = result.completions[0].decode(str)
    attempt, resumed = output.split()
    assert attempt == "attempt=2"
    assert int(resumed.removeprefix("resumed_from=")) >= 2


def test_a_name_no_worker_knows_fails_fast(
    app: App, worker: ThreadWorker, engine: LocalEngine, cache_dir: str
) -> None:
    from dex import BlobCacheConfig, Client, ClientOptions, Registry, WorkerTarget, open_blob_cache

    newer = engine_app.NewerAgentFlow()
    cache = open_blob_cache(BlobCacheConfig(directory=cache_dir + "/newer", max_bytes=1_000_000))
    client = Client(
        Registry([newer]),
        cache,
        ClientOptions(server_address=engine.address, worker_target=WorkerTarget(pull=True)),
    )
    try:
        client.start_flow(newer, "ghost-1", "x")
        with pytest.raises(WorkerInvocationError) as failure:
            client.invoke_rpc(newer.ghost, "ghost-1")
        assert "no connected Worker knows RPC 'ghost'" in str(failure.value)
    finally:
        cache.close()


def test_worker_killed_before_any_output_still_costs_the_attempt(
    app: App, engine: LocalEngine
) -> None:
    quiet = app.flow(engine_app.QuietFlow)
    first = WorkerProcess(engine.address)
    try:
        app.client.start_flow(quiet, "quiet-1", 30)
        time.sleep(1.0)  # attempt 1 is sleeping and has sent nothing
    finally:
        first.kill()
    second = WorkerProcess(engine.address)
    try:
        result = app.client.wait_for_flow("quiet-1")
    finally:
        second.stop()
    assert result.completions[0].decode(str) == "attempt=2"
