"""PrivateDexEngine and KillableWorkerProcess against the real local engine.

A Worker child is SIGKILLed while its Step waits at a FileGate; a new Worker
reruns the Step and the Flow completes. The engine is killed and restarted on
its database, and the Flow it knew is still there.
"""

import json
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dex
import pytest

from dex_agents.testing import (
    STATE_DIRECTORY_VARIABLE,
    FileGate,
    InvocationLog,
    KillableWorkerProcess,
    PrivateDexEngine,
    StepMethod,
    StepOutcome,
    executed_step_types,
    read_step_history,
)
from dex_agents.testing._probe_flow import PROBE_GATE, PROBE_RUNS_LOG, ProbeFlow

PROBE_FACTORY = "dex_agents.testing._probe_flow:build_probe_flow"


@pytest.fixture(scope="module")
def engine() -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start() as running:
        yield running


@pytest.fixture
async def client(engine: PrivateDexEngine) -> AsyncIterator[tuple[dex.AsyncClient, ProbeFlow]]:
    flow = ProbeFlow()
    with tempfile.TemporaryDirectory() as cache_directory:
        cache = dex.open_blob_cache(dex.BlobCacheConfig(cache_directory, 16 * 1024 * 1024))
        client = dex.AsyncClient(
            dex.Registry([flow], allow_async_handlers=True),
            cache,
            dex.ClientOptions(
                server_address=engine.server_address, worker_target=dex.WorkerTarget(pull=True)
            ),
        )
        try:
            yield client, flow
        finally:
            await client.close()
            cache.close()


def _start_worker(engine: PrivateDexEngine, state: Path) -> KillableWorkerProcess:
    return KillableWorkerProcess.start(
        server_address=engine.server_address,
        log_path=state / "worker.log",
        arguments=[PROBE_FACTORY],
        environment={STATE_DIRECTORY_VARIABLE: str(state)},
    )


async def _wait_for_output(client: dex.AsyncClient, flow_id: str) -> str:
    for _ in range(60):
        try:
            result = await client.wait_for_flow(flow_id, timeout=timedelta(seconds=5))
        except dex.LongPollTimeoutError:
            continue
        assert result.status is dex.FlowStatus.COMPLETED, result.error_message
        return result.completions[0].decode(str)
    raise AssertionError(f"{flow_id} did not complete")


async def test_a_killed_worker_step_reruns_on_a_new_worker(
    engine: PrivateDexEngine, client: tuple[dex.AsyncClient, ProbeFlow], tmp_path: Path
) -> None:
    dex_client, flow = client
    gate = FileGate(tmp_path, PROBE_GATE)
    runs = InvocationLog(tmp_path / PROBE_RUNS_LOG)
    first = _start_worker(engine, tmp_path)
    flow_id = f"probe-{uuid.uuid4().hex}"
    await dex_client.start_flow(flow, flow_id, "hello")
    await gate.wait_until_reached()
    first.kill()
    assert not first.is_running()
    assert runs.count("probe") == 1
    gate.release()
    with _start_worker(engine, tmp_path) as second:
        assert await _wait_for_output(dex_client, flow_id) == "HELLO"
        assert second.stop(timedelta(seconds=30)) == 0
    assert runs.count("probe") == 2
    history = await read_step_history(engine.server_address, flow_id)
    assert executed_step_types(history) == ["ProbeStep"]
    [entry] = [e for e in history if e.method is StepMethod.EXECUTE]
    assert entry.outcome is StepOutcome.COMPLETED
    assert entry.final_attempt == 2
    assert abs(datetime.now(UTC) - entry.event_time) < timedelta(hours=1)


async def test_the_engine_restarts_on_its_database_at_the_same_address(
    engine: PrivateDexEngine, client: tuple[dex.AsyncClient, ProbeFlow], tmp_path: Path
) -> None:
    dex_client, flow = client
    FileGate(tmp_path, PROBE_GATE).release()
    address = engine.server_address
    flow_id = f"probe-{uuid.uuid4().hex}"
    with _start_worker(engine, tmp_path) as worker:
        await dex_client.start_flow(flow, flow_id, "before restart")
        assert await _wait_for_output(dex_client, flow_id) == "BEFORE RESTART"
        worker.stop()
    engine.kill()
    assert not engine.is_running()
    engine.restart()
    assert engine.server_address == address
    info = await dex_client.describe_flow(flow_id)
    assert info.status is dex.FlowStatus.COMPLETED
    with _start_worker(engine, tmp_path) as worker:
        again = f"probe-{uuid.uuid4().hex}"
        await dex_client.start_flow(flow, again, "after restart")
        assert await _wait_for_output(dex_client, again) == "AFTER RESTART"
        worker.stop()


def test_a_worker_that_cannot_start_fails_with_its_log(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match="no_such_module"):
        KillableWorkerProcess.start(
            server_address=engine.server_address,
            log_path=tmp_path / "worker.log",
            arguments=["no_such_module:factory"],
        )


FAKE_DEXCLI = """#!{python}
# Stands in for dexcli: records its arguments, then serves the local engine on the
# requested port and database, as `dexcli dev --engine zd` serves Dex Server.
import json, os, sys
arguments = sys.argv[1:]
with open({record!r}, "a") as record:
    record.write(json.dumps(arguments) + "\\n")
value = lambda flag: arguments[arguments.index(flag) + 1]
os.execv(sys.executable, [sys.executable, "-m", "dex_local_engine.cli", "serve",
    "--host", value("--bind-address"), "--port", value("--dex-port"),
    "--db", value("--sqlite-db-filename")])
"""


def test_with_dexcli_set_the_engine_runs_dexcli_dev_on_free_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "dexcli-calls.jsonl"
    fake = tmp_path / "dexcli"
    fake.write_text(FAKE_DEXCLI.format(python=sys.executable, record=str(record)))
    fake.chmod(0o755)
    server_zd = tmp_path / "dex-server-zd"  # dexcli's engine binary, found next to it
    server_zd.write_text("#!/bin/sh\n")
    server_zd.chmod(0o755)
    monkeypatch.setenv("DEXCLI", str(fake))
    monkeypatch.delenv("DEX_SERVER_ZD_BINARY", raising=False)
    with PrivateDexEngine.start(tmp_path / "engine") as engine:
        assert engine.uses_dexcli
        address = engine.server_address
        engine.restart()
        assert engine.server_address == address
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(calls) == 2
    first = calls[0]
    assert first[:3] == ["dev", "--engine", "zd"]
    assert "--open=false" in first
    assert first[first.index("--dex-port") + 1] == address.rsplit(":", 1)[1]
    assert first[first.index("--sqlite-db-filename") + 1] == str(
        tmp_path / "engine" / "dex.sqlite.db"
    )
    assert calls[1] == first
