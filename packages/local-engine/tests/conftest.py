"""Fixtures: a real engine, real Dex SDK Clients, and real pull Workers (threads or processes)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import engine_app  # noqa: E402
from dex import (  # noqa: E402
    BlobCacheConfig,
    Client,
    ClientOptions,
    Registry,
    Worker,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex.worker_options import PullWorkerOptions  # noqa: E402

from dex_local_engine import LocalEngine  # noqa: E402


@pytest.fixture
def cache_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield directory


@pytest.fixture
def engine() -> Iterator[LocalEngine]:
    with LocalEngine() as running:
        yield running


class App:
    """The test Flows registered once, with a Client pointed at an engine."""

    def __init__(self, address: str, cache_dir: str) -> None:
        self.flows = engine_app.flows()
        self.agent: engine_app.AgentFlow = self.flows[0]  # type: ignore[assignment]
        self.long: engine_app.LongFlow = self.flows[1]  # type: ignore[assignment]
        self.registry = Registry(self.flows)
        self.cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
        self.client = Client(
            self.registry,
            self.cache,
            ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
        )

    def flow(self, kind: type[Any]) -> Any:
        return next(flow for flow in self.flows if isinstance(flow, kind))


class ThreadWorker:
    """A real pull Worker on a thread of the test process."""

    def __init__(self, registry: Registry, cache: Any, address: str) -> None:
        self.worker = Worker(
            registry,
            cache,
            WorkerOptions(server_address=address, pull=PullWorkerOptions(max_concurrent_tasks=8)),
        )
        self.thread = threading.Thread(target=self.worker.start, daemon=True)

    def start(self) -> ThreadWorker:
        self.thread.start()
        self.worker.wait_pull_registered(30)
        return self

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(30)


class RunningFlows:
    """Some Flows registered once, a Client, and a pull Worker thread on one engine."""

    def __init__(self, flows: list[Any], address: str, cache_dir: str) -> None:
        self.flows = flows
        self.registry = Registry(flows)
        self.cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
        self.client = Client(
            self.registry,
            self.cache,
            ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
        )
        self.worker = ThreadWorker(self.registry, self.cache, address).start()

    def flow(self, kind: type[Any]) -> Any:
        """The registered instance of a Flow class."""
        return next(flow for flow in self.flows if type(flow) is kind)

    def close(self) -> None:
        self.worker.stop()
        self.cache.close()


@contextmanager
def running_flows(flows: list[Any], address: str, cache_dir: str) -> Iterator[RunningFlows]:
    """Run ``flows`` on a pull Worker thread against the engine at ``address``."""
    running = RunningFlows(flows, address, cache_dir)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def app(engine: LocalEngine, cache_dir: str) -> Iterator[App]:
    made = App(engine.address, cache_dir)
    yield made
    made.cache.close()


@pytest.fixture
def worker(app: App, engine: LocalEngine) -> Iterator[ThreadWorker]:
    running = ThreadWorker(app.registry, app.cache, engine.address).start()
    yield running
    running.stop()


class WorkerProcess:
    """A pull Worker in a child process running engine_worker.py."""

    def __init__(self, address: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "engine_worker.py"), address],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(TESTS)},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "worker ready":
            self.kill()
            raise RuntimeError(f"worker did not start: {line!r}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.kill()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EngineProcess:
    """``python -m dex_local_engine serve`` in a child process."""

    def __init__(self, database: str, port: int = 0, extra_args: Sequence[str] = ()) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dex_local_engine",
                "serve",
                "--port",
                str(port),
                "--db",
                database,
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.ready_line = self.process.stdout.readline().strip()
        if not self.ready_line.startswith("dex-local-engine ready on "):
            self.kill()
            assert self.process.stderr is not None
            raise RuntimeError(f"engine did not start: {self.process.stderr.read()}")
        self.address = self.ready_line.split()[3]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(30)
