"""Quiet, useful logs: an engine restart with tasks in flight is one WARNING and one INFO
line in a Worker's log and one line in the engine's, not a traceback per task; ``serve()``
logs its start, registration and stop at INFO with a stderr handler of its own only
when the application configured no logging."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentHost
from dex_agents.testing import FileGate, PrivateDexEngine
from dex_agents.testing._processes import ChildProcess

FLOWS = Path(__file__).resolve().parent / "worker_flows"
SESSIONS = 10


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start(tmp_path / "engine") as started:
        yield started


async def _until_logged(process: ChildProcess, text: str) -> None:
    async with asyncio.timeout(60):
        while text not in process.read_log():  # noqa: ASYNC110 - a child's log sets no Event
            await asyncio.sleep(0.05)


async def test_an_engine_restart_with_tasks_in_flight_logs_one_line_per_cause(
    engine: PrivateDexEngine,
    worker_flow: Callable[[str], Any],
    worker_flows_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    os.environ["GATED_GATE_DIR"] = str(tmp_path)
    gate = FileGate(tmp_path, "slow_lookup")
    flow = worker_flow("gated_agent")
    worker = ChildProcess.spawn(
        [sys.executable, str(FLOWS / "gated_agent.py")],
        log_path=tmp_path / "worker.log",
        environment={
            **worker_flows_environment,
            "DEX_SERVER_ADDRESS": engine.server_address,
            "GATED_GATE_DIR": str(tmp_path),
        },
    )
    try:
        async with AgentHost(flow, server_address=engine.server_address, worker=False) as host:
            sessions = host.client(flow)
            await _until_logged(worker, "Worker registered")
            for n in range(SESSIONS):
                await sessions.start_session(f"restart-{n}", "where is order 42?")
            await gate.wait_until_reached(SESSIONS)
            engine.kill()
            await _until_logged(worker, "Worker lost its task streams to the Dex server")
            engine.restart()
            await _until_logged(worker, "Worker task streams registered again")
            gate.release()
            for n in range(SESSIONS):
                snapshot = await sessions.wait_for_turn(f"restart-{n}", 1)
                assert snapshot.messages[-1].text == "order 42: shipped"
    finally:
        await asyncio.to_thread(worker.terminate)
    log = worker.read_log()
    assert "Traceback" not in log
    assert " ERROR " not in log
    assert log.count(" WARNING ") == 1
    assert log.count("Worker task streams registered again") == 1
    engine_log = engine.log_path.read_text()
    # One line for the restart (the tools and any other Step that was running).
    assert engine_log.count("Step attempts were running when the engine stopped") == 1
    assert "restart-0/CallTool-1" in engine_log
    assert "failed: the engine stopped while this attempt was running" not in engine_log


SERVE_SCRIPT = """
import asyncio, logging, sys
sys.path.insert(0, sys.argv[2])
from gated_agent import build_flows
from dex_agents import AgentHost

if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.WARNING, format="app: %(message)s")

async def main():
    host = AgentHost(build_flows())
    serving = asyncio.create_task(host.serve())
    while host.worker is None or host._stop_requested is None:
        await asyncio.sleep(0.01)
    await host.stop()
    await serving

asyncio.run(main())
"""


@pytest.mark.parametrize("logging_setup", ["none", "configured"])
def test_serve_logs_at_info_unless_the_application_configured_logging(
    logging_setup: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVE_SCRIPT, logging_setup, str(FLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GATED_GATE_DIR": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if logging_setup == "none":
        for line in (
            "AgentHost serving Flow types GatedAgent",
            "Worker registered",
            "Worker draining: no Step running",
            "AgentHost stopped",
        ):
            assert f"INFO dex_agents.host: {line}" in done.stderr
    else:  # the application's WARNING level and format stay
        assert "dex_agents.host" not in done.stderr
        assert "AgentHost serving" not in done.stderr
