"""Graceful shutdown of a Worker-only process, and the probes an orchestrator polls.

A Worker process (``AgentHost(..., client=False).serve()``) runs a tool that waits at a
file gate; the test sends it SIGTERM. Within ``drain_timeout`` the tool finishes and the
process exits 0; past it, the host names the abandoned Step in a WARNING, the process
exits 75 and the Step runs again on the next Worker. No test reads a clock: the short
drain expires only because the gate stays shut.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import (
    AgentHost,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    HealthProbes,
    StepsAbandoned,
    WorkerTuning,
)
from dex_agents.testing import FileGate, PrivateDexEngine
from dex_agents.testing._processes import ChildProcess

WORKER_SCRIPT = Path(__file__).resolve().parent / "worker_flows" / "gated_agent.py"
LOG_WAIT = timedelta(seconds=60)


@pytest.fixture
def gated_flow(worker_flow: Callable[[str], Any]) -> AgentSessionFlow:
    return worker_flow("gated_agent")


@pytest.fixture(scope="module")
def served_engine() -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start() as engine:
        yield engine


def _start_worker(
    engine: PrivateDexEngine,
    gates: Path,
    log: Path,
    drain_seconds: float | None,
    environment: dict[str, str],
) -> ChildProcess:
    environment = {
        **environment,
        "DEX_SERVER_ADDRESS": engine.server_address,
        "GATED_GATE_DIR": str(gates),
    }
    if drain_seconds is not None:
        environment["GATED_DRAIN_SECONDS"] = str(drain_seconds)
    return ChildProcess.spawn(
        [sys.executable, str(WORKER_SCRIPT)], log_path=log, environment=environment
    )


@dataclass
class _Drill:
    """A Worker child SIGTERMed while its tool waits at the gate, and the session's client."""

    engine: PrivateDexEngine
    directory: Path
    environment: dict[str, str]
    worker: ChildProcess
    sessions: AgentSessionClient
    gate: FileGate

    async def turn_on_a_second_worker(self, session_id: str) -> AgentSnapshot:
        """The session's finished turn, once a fresh Worker (gate open) served it."""
        self.gate.release()
        second = _start_worker(
            self.engine, self.directory, self.directory / "second.log", None, self.environment
        )
        try:
            return await self.sessions.wait_for_turn(session_id, 1)
        finally:
            await _stop(second)


@contextlib.asynccontextmanager
async def _sigterm_mid_tool(
    engine: PrivateDexEngine,
    flow: AgentSessionFlow,
    directory: Path,
    environment: dict[str, str],
    session_id: str,
    drain_seconds: float,
) -> AsyncIterator[_Drill]:
    os.environ["GATED_GATE_DIR"] = str(directory)  # the in-process Flow's tool is never run
    gate = FileGate(directory, "slow_lookup")
    worker = _start_worker(engine, directory, directory / "worker.log", drain_seconds, environment)
    async with AgentHost(flow, server_address=engine.server_address, worker=False) as host:
        sessions = host.client(flow)
        await _log_line(worker, "Worker registered")
        await sessions.start_session(session_id, "where is order 42?")
        await gate.wait_until_reached(1)
        os.kill(worker.pid, signal.SIGTERM)
        yield _Drill(engine, directory, environment, worker, sessions, gate)


async def _log_line(process: ChildProcess, text: str) -> str:
    """The first log line of ``process`` that contains ``text``."""
    async with asyncio.timeout(LOG_WAIT.total_seconds()):
        while True:
            for line in process.read_log().splitlines():
                if text in line:
                    return line
            if not process.is_running():
                raise AssertionError(f"exited before logging {text!r}:\n{process.read_log()}")
            await asyncio.sleep(0.05)


async def _exit_status(process: ChildProcess) -> int | None:
    """The status ``process`` exits with on its own (after the test's one SIGTERM)."""
    async with asyncio.timeout(LOG_WAIT.total_seconds()):
        while process.is_running():  # noqa: ASYNC110 - a child process sets no Event
            await asyncio.sleep(0.05)
    return process.returncode


async def _stop(process: ChildProcess) -> int | None:
    return await asyncio.to_thread(process.terminate, LOG_WAIT)


async def test_sigterm_past_drain_timeout_names_the_step_and_exits_75(
    served_engine: PrivateDexEngine,
    gated_flow: AgentSessionFlow,
    worker_flows_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    async with _sigterm_mid_tool(
        served_engine, gated_flow, tmp_path, worker_flows_environment, "drain-abandon", 0.5
    ) as drill:
        warning = await _log_line(drill.worker, "drain_timeout (0.5 s) expired")
        assert "WARNING dex_agents.host" in warning
        assert "Step GatedAgent/" in warning
        assert "of session drain-abandon (attempt 1)" in warning
        assert await _exit_status(drill.worker) == StepsAbandoned.EXIT_STATUS
        log = drill.worker.read_log()
        assert "Steps abandoned: 1; exiting with status 75" in log
        assert "Traceback" not in log
        snapshot = await drill.turn_on_a_second_worker("drain-abandon")
    assert snapshot.messages[-1].text == "order 42: shipped"
    assert drill.gate.reached_count() == 2  # the read tool ran again on the second Worker


async def test_sigterm_within_drain_timeout_lets_the_step_finish_and_exits_0(
    served_engine: PrivateDexEngine,
    gated_flow: AgentSessionFlow,
    worker_flows_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    async with _sigterm_mid_tool(
        served_engine, gated_flow, tmp_path, worker_flows_environment, "drain-finish", 600
    ) as drill:
        draining = await _log_line(
            drill.worker, "Worker draining: waiting up to 600 s for 1 running"
        )
        assert "of session drain-finish" in draining
        drill.gate.release()
        assert await _exit_status(drill.worker) == 0
        assert "Worker drained: every running Step finished" in drill.worker.read_log()
        snapshot = await drill.turn_on_a_second_worker("drain-finish")
    assert snapshot.messages[-1].text == "order 42: shipped"
    assert drill.gate.reached_count() == 1  # the tool's result was kept: it did not run again


def _probe(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()


async def test_probes_say_live_and_ready_once_registered_and_not_ready_while_draining(
    gated_flow: AgentSessionFlow, tmp_path: Path
) -> None:
    os.environ["GATED_GATE_DIR"] = str(tmp_path)
    gate = FileGate(tmp_path, "slow_lookup")
    flow = gated_flow
    host = AgentHost(
        flow,
        health=HealthProbes(port=0),
        worker_tuning=WorkerTuning(drain_timeout=None),
    )
    async with host:
        address = host.health_address
        assert address is not None
        assert await asyncio.to_thread(_probe, address, "/livez") == (200, "ok")
        assert await asyncio.to_thread(_probe, address, "/readyz") == (200, "ok")
        assert (await asyncio.to_thread(_probe, address, "/nothing"))[0] == 404
        await host.client().start_session("probes-1", "where is order 42?")
        await gate.wait_until_reached(1)
        stopping = asyncio.create_task(host.stop_worker())
        await asyncio.sleep(0)
        assert await asyncio.to_thread(_probe, address, "/readyz") == (503, "draining")
        assert await asyncio.to_thread(_probe, address, "/livez") == (200, "ok")
        gate.release()  # drain_timeout=None: the drain waits for the tool
        await stopping
        assert host.abandoned_steps == ()
        assert await asyncio.to_thread(_probe, address, "/readyz") == (
            503,
            "the Worker is not running",
        )
    assert host.health_address is None


def test_bad_drain_timeouts_and_probe_settings_are_refused(gated_flow: AgentSessionFlow) -> None:
    with pytest.raises(ValueError, match="drain_timeout must be a positive timedelta or None"):
        WorkerTuning(drain_timeout=timedelta(0))
    with pytest.raises(ValueError, match="drain_timeout must be a positive timedelta or None"):
        WorkerTuning(drain_timeout=30)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"HealthProbes\.port must be an int in 0-65535"):
        HealthProbes(port=70000)
    with pytest.raises(ValueError, match=r"HealthProbes\.port must be an int in 0-65535"):
        HealthProbes(port="8081")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"HealthProbes\.host must be a non-empty str"):
        HealthProbes(port=8081, host="")
    with pytest.raises(TypeError, match="health must be a HealthProbes or None, got int"):
        AgentHost(gated_flow, health=8081)  # type: ignore[arg-type]
