"""SIGKILL ``dex-local-engine serve`` under load, restart it on the same database.

50 sessions run Steps (Attribute writes, Channel publications, Stream writes),
Timers and RPCs while the engine process is killed. After a restart on the same
file every committed Step, Attribute and Channel message must be there exactly
once, every Timer must still fire and every Flow must finish.
"""

from __future__ import annotations

import threading
from pathlib import Path

import load_app as app
import pytest
from conftest import EngineProcess, ThreadWorker, free_port
from dex import (
    BlobCacheConfig,
    Client,
    ClientOptions,
    DexServiceError,
    FlowStatus,
    Registry,
    StepExecutionId,
    WaitForStepCompletionOptions,
    WorkerTarget,
    open_blob_cache,
)

SESSIONS = 50


def _client(registry: Registry, cache: object, address: str) -> Client:
    return Client(
        registry,
        cache,  # type: ignore[arg-type]
        ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
    )


@pytest.mark.timeout(300)
def test_sigkill_under_load_loses_nothing_committed(tmp_path: Path, cache_dir: str) -> None:
    database, port = str(tmp_path / "load.db"), free_port()
    flows = app.flows()
    registry = Registry(flows)
    session: app.SessionFlow = flows[0]  # type: ignore[assignment]
    quiet = ("--log-level", "WARNING")  # stderr is a pipe nobody reads while it runs
    engine = EngineProcess(database, port, extra_args=quiet)
    cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=50_000_000))
    worker = ThreadWorker(registry, cache, engine.address).start()
    client = _client(registry, cache, engine.address)
    ids = [f"session-{n}" for n in range(SESSIONS)]
    pinged: set[str] = set()
    try:
        for flow_id in ids:
            client.start_flow(session, flow_id, 1)
        # Half the sessions are pinged while the kill lands: some RPCs are in flight.
        stop_pinging = threading.Event()

        def ping_some() -> None:
            for flow_id in ids[::2]:
                if stop_pinging.is_set():
                    return
                try:
                    client.invoke_rpc(session.ping, flow_id, "before")
                    pinged.add(flow_id)
                except DexServiceError:
                    return  # the engine died under this RPC: it is retried below

        pinger = threading.Thread(target=ping_some)
        pinger.start()
        client.wait_for_step_completion(
            ids[-1],
            StepExecutionId("Work", 1),
            WaitForStepCompletionOptions(),
        )
        engine.kill()
        stop_pinging.set()
        pinger.join(60)

        engine = EngineProcess(database, port, extra_args=quiet)
        for flow_id in ids:
            if flow_id not in pinged:
                client.invoke_rpc(session.ping, flow_id, "after")
        expected_logs = ",".join(f"log-{n}" for n in range(1, app.WORK_STEPS + 1))
        for flow_id in ids:
            result = client.wait_for_flow(flow_id)
            assert result.status is FlowStatus.COMPLETED, flow_id
            note = "before" if flow_id in pinged else "after"
            assert result.single_output(str) == (
                f"done={app.WORK_STEPS}|timer=True|ping={note}|logs={expected_logs}"
            ), flow_id
            written = {
                message.value
                for message in client.list_stream_messages(flow_id, session.trace, 100).messages
            }
            # A Step attempt cut short by the kill may have written before it ran again.
            assert written == {f"work-{n}" for n in range(1, app.WORK_STEPS + 1)}, flow_id
    finally:
        worker.stop()
        engine.kill()
        cache.close()
