"""A private Dex engine for one test module: its own port, its own database, killable.

By default it runs the local engine (``dex-local-engine serve``) in a child
process. When ``DEXCLI`` names a ``dexcli`` binary it runs ``dexcli dev --engine
zd`` instead, so the same tests run against the distributed Dex Server.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2_grpc
from google.protobuf import empty_pb2

from dex_agents.testing._ports import LOOPBACK_HOST, find_free_loopback_ports
from dex_agents.testing._processes import ChildProcess

LOCAL_ENGINE_READY_PREFIX = "dex-local-engine ready on "
DEFAULT_STARTUP_TIMEOUT = timedelta(seconds=60)


def _server_answers(address: str, timeout: timedelta) -> bool:
    with grpc.insecure_channel(address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        health_check = cast(Callable[..., object], stub.HealthCheck)
        try:
            health_check(empty_pb2.Empty(), timeout=timeout.total_seconds())
        except grpc.RpcError:
            return False
        return True


class PrivateDexEngine:
    """A Dex engine child process; ``kill()`` and ``restart()`` keep the database.

    Use it as a context manager, or call ``close()``. ``server_address`` stays the
    same across restarts, so Clients and Workers reconnect on their own.
    """

    def __init__(
        self,
        state_directory: Path,
        *,
        dexcli: str | None,
        startup_timeout: timedelta,
        owns_state_directory: bool,
    ) -> None:
        self.state_directory = state_directory
        self.database_path = state_directory / "dex.sqlite.db"
        self.log_path = state_directory / "engine.log"
        self._dexcli = dexcli
        self._startup_timeout = startup_timeout
        self._owns_state_directory = owns_state_directory
        self._port = 0
        self._web_port = 0
        self._process: ChildProcess | None = None

    @classmethod
    def start(
        cls,
        state_directory: Path | str | None = None,
        *,
        startup_timeout: timedelta = DEFAULT_STARTUP_TIMEOUT,
    ) -> PrivateDexEngine:
        """Start an engine whose database lives in ``state_directory``.

        Without a directory, a temporary one is created and removed on ``close()``.
        """
        owns = state_directory is None
        directory = (
            Path(tempfile.mkdtemp(prefix="dex-engine-"))
            if state_directory is None
            else Path(state_directory)
        )
        directory.mkdir(parents=True, exist_ok=True)
        dexcli = os.environ.get("DEXCLI") or None
        engine = cls(
            directory,
            dexcli=dexcli,
            startup_timeout=startup_timeout,
            owns_state_directory=owns,
        )
        engine._launch()
        return engine

    @property
    def server_address(self) -> str:
        """``host:port`` of the engine's FlowService, stable across restarts."""
        if self._port == 0:
            raise RuntimeError("the engine has not started")
        return f"{LOOPBACK_HOST}:{self._port}"

    @property
    def uses_dexcli(self) -> bool:
        return self._dexcli is not None

    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running()

    def kill(self) -> None:
        """SIGKILL the engine (and anything it started); the database stays."""
        if self._process is not None:
            self._process.kill()
            self._process = None

    def restart(self) -> None:
        """Start the engine again on the same database and the same port."""
        self.kill()
        self._launch()

    def stop(self) -> None:
        """Stop the engine gracefully (SIGTERM, then SIGKILL after a grace period)."""
        if self._process is not None:
            self._process.terminate(timedelta(seconds=10))
            self._process = None

    def close(self) -> None:
        """Stop the engine and remove a state directory this object created."""
        self.stop()
        if self._owns_state_directory:
            shutil.rmtree(self.state_directory, ignore_errors=True)

    def __enter__(self) -> PrivateDexEngine:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _launch(self) -> None:
        if self._dexcli is not None:
            self._launch_dexcli(self._dexcli)
        else:
            self._launch_local_engine()
        self._wait_until_serving()

    def _launch_local_engine(self) -> None:
        command = [
            sys.executable,
            "-m",
            "dex_local_engine.cli",
            "serve",
            "--host",
            LOOPBACK_HOST,
            "--port",
            str(self._port),
            "--db",
            str(self.database_path),
        ]
        process = ChildProcess.spawn(command, log_path=self.log_path)
        self._process = process
        try:
            line = process.wait_for_log_line(LOCAL_ENGINE_READY_PREFIX, self._startup_timeout)
        except BaseException:
            process.kill()
            self._process = None
            raise
        address = line[len(LOCAL_ENGINE_READY_PREFIX) :].split()[0]
        self._port = int(address.rsplit(":", 1)[1])

    def _launch_dexcli(self, dexcli: str) -> None:
        if self._port == 0:
            self._port, self._web_port = find_free_loopback_ports(2)
        command = [
            dexcli,
            "dev",
            "--engine",
            "zd",
            "--bind-address",
            LOOPBACK_HOST,
            "--dex-port",
            str(self._port),
            "--web-port",
            str(self._web_port),
            "--open=false",
            "--sqlite-db-filename",
            str(self.database_path),
            "--blob-store-dir",
            str(self.state_directory / "blobs"),
        ]
        self._process = ChildProcess.spawn(command, log_path=self.log_path)

    def _wait_until_serving(self) -> None:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + self._startup_timeout.total_seconds()
        while not _server_answers(self.server_address, timedelta(seconds=1)):
            if not process.is_running() or time.monotonic() >= deadline:
                log = process.read_log()
                process.kill()
                self._process = None
                raise RuntimeError(
                    f"the Dex engine at {self.server_address} did not answer a health check;"
                    f" log {self.log_path}:\n{log[-4000:]}"
                )
            time.sleep(0.1)
