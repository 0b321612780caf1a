"""The engine itself is SIGKILLed mid-Flow and restarted on the same database."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import App, EngineProcess, WorkerProcess, free_port
from dex import FlowStatus


def test_engine_crash_loses_nothing_committed(tmp_path: Path, cache_dir: str) -> None:
    database = str(tmp_path / "engine.db")
    port = free_port()
    engine = EngineProcess(database, port)
    worker: WorkerProcess | None = None
    try:
        worker = WorkerProcess(engine.address)
        app = App(engine.address, cache_dir)
        counter = app.flow(__import__("engine_app").CounterFlow)
        app.client.start_flow(counter, "counter-1", "total")
        assert app.client.invoke_rpc(counter.add, "counter-1", 3) == 3
        assert app.client.invoke_rpc(counter.add, "counter-1", 4) == 7
        app.client.start_flow(app.long, "long-2", 12)
        nap = app.flow(__import__("engine_app").NapFlow)
        app.client.start_flow(nap, "nap-1", 3)
        time.sleep(1.6)  # the Step is running and has heartbeated
        engine.kill()

        engine = EngineProcess(database, port)
        assert app.client.invoke_rpc(counter.add, "counter-1", 5) == 12
        app.client.invoke_rpc(counter.finish, "counter-1")
        result = app.client.wait_for_flow("counter-1")
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "total:12"

        long_result = app.client.wait_for_flow("long-2")
        assert long_result.status is FlowStatus.COMPLETED
        attempt, resumed = long_result.completions[0].decode(str).split()
        assert attempt == "attempt=2"
        assert int(resumed.removeprefix("resumed_from=")) >= 2
        nap_result = app.client.wait_for_flow("nap-1")
        assert nap_result.status is FlowStatus.COMPLETED
        assert nap_result.completions[0].decode(str) == "napped 3s, fired=True"
        app.cache.close()
    finally:
        if worker is not None:
            worker.stop()
        engine.kill()


def test_clean_engine_stop_and_restart(tmp_path: Path, cache_dir: str) -> None:
    database = str(tmp_path / "engine.db")
    port = free_port()
    engine = EngineProcess(database, port)
    worker: WorkerProcess | None = None
    try:
        worker = WorkerProcess(engine.address)
        app = App(engine.address, cache_dir)
        counter = app.flow(__import__("engine_app").CounterFlow)
        app.client.start_flow(counter, "counter-2", "sum")
        assert app.client.invoke_rpc(counter.add, "counter-2", 2) == 2
        assert engine.stop() == 0  # SIGTERM: Workers are asked to reconnect
        engine = EngineProcess(database, port)
        assert app.client.invoke_rpc(counter.add, "counter-2", 3) == 5
        app.client.invoke_rpc(counter.finish, "counter-2")
        result = app.client.wait_for_flow("counter-2")
        assert result.completions[0].decode(str) == "sum:5"
        app.cache.close()
    finally:
        if worker is not None:
            worker.stop()
        engine.kill()
