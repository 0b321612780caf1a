"""A private Dex engine for one test module: its own port, its own database, killable.

By default it runs the local engine (``dex-local-engine serve``) in a child
process. When ``DEXCLI`` names a ``dexcli`` binary it runs ``dexcli dev --engine
zd`` instead, so the same tests run against the distributed Dex Server. Its
``dex-server-zd`` comes from ``DEX_SERVER_ZD_BINARY`` or sits next to ``dexcli``,
and it runs with ``dev.durabilityMode: processCrashSafe`` (no fsync; survives a
process kill) through a ``-zd-config`` file, which ``dexcli`` releases that predate
``--durability`` read too. ``server_zd_config_path`` passes a ``dex-server-zd``
overrides file of your own instead (set ``dev.durabilityMode`` there too).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2_grpc
from google.protobuf import empty_pb2

from dex_agents._host_auth import bearer_metadata
from dex_agents.testing._ports import LOOPBACK_HOST, find_free_loopback_ports
from dex_agents.testing._processes import ChildProcess

LOCAL_ENGINE_READY_PREFIX = "dex-local-engine ready on "
DEFAULT_STARTUP_TIMEOUT = timedelta(seconds=60)
DEXCLI_VARIABLE = "DEXCLI"
"""Names the ``dexcli`` binary; set, ``PrivateDexEngine`` runs ``dexcli dev --engine zd``."""
SERVER_ZD_BINARY_VARIABLE = "DEX_SERVER_ZD_BINARY"
"""Names the ``dex-server-zd`` binary ``dexcli dev --engine zd`` runs; unset, the one next
to ``dexcli``. The engine passes the path it resolved on to ``dexcli`` in this variable."""
SERVER_ZD_BINARY_NAME = "dex-server-zd"
PROCESS_CRASH_SAFE_ZD_CONFIG = "dev:\n  durabilityMode: processCrashSafe\n"
"""The ``-zd-config`` file the engine writes: no fsync, and a process kill loses nothing."""
PROCESS_CRASH_SAFE_ZD_CONFIG_NAME = "dex-server-zd.process-crash-safe.yaml"


@dataclass(frozen=True)
class DexcliEngine:
    """What ``dexcli dev --engine zd`` runs with: both binaries and the ``-zd-config`` file."""

    dexcli: Path
    server_zd_binary: Path
    zd_config_path: Path
    """``server_zd_config_path`` when given, else the process-crash-safe file that
    ``PrivateDexEngine`` writes into its state directory."""
    writes_zd_config: bool
    """Whether ``zd_config_path`` is the engine's own file (written before each start)."""

    @staticmethod
    def resolve(
        dexcli: str,
        state_directory: Path,
        *,
        server_zd_config_path: Path | str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> DexcliEngine:
        """Find both binaries and the config file; raise ``FileNotFoundError`` naming what
        is missing and how to supply it."""
        env = os.environ if environment is None else environment
        dexcli_path = _executable(dexcli, f"{DEXCLI_VARIABLE}={dexcli}")
        named = env.get(SERVER_ZD_BINARY_VARIABLE) or None
        if named is not None:
            server_zd = _executable(named, f"{SERVER_ZD_BINARY_VARIABLE}={named}")
        else:
            beside = dexcli_path.parent / SERVER_ZD_BINARY_NAME
            if not _is_executable(beside):
                raise FileNotFoundError(
                    f"dexcli dev --engine zd needs {SERVER_ZD_BINARY_NAME}: none at {beside}"
                    f" (next to dexcli); set {SERVER_ZD_BINARY_VARIABLE} to its path"
                )
            server_zd = beside
        if server_zd_config_path is not None:
            config = Path(server_zd_config_path)
            if not config.is_file():
                raise FileNotFoundError(
                    f"server_zd_config_path {config} is not a file; it holds the"
                    " dex-server-zd overrides (with dev.durabilityMode) for -zd-config"
                )
            return DexcliEngine(dexcli_path, server_zd, config.resolve(), writes_zd_config=False)
        config = state_directory / PROCESS_CRASH_SAFE_ZD_CONFIG_NAME
        return DexcliEngine(dexcli_path, server_zd, config, writes_zd_config=True)

    def command(
        self, *, port: int, web_port: int, database_path: Path, blob_store_directory: Path
    ) -> list[str]:
        """The ``dexcli dev --engine zd`` command line for one start."""
        return [
            str(self.dexcli),
            "dev",
            "--engine",
            "zd",
            "-zd-config",
            str(self.zd_config_path),
            "--bind-address",
            LOOPBACK_HOST,
            "--dex-port",
            str(port),
            "--web-port",
            str(web_port),
            "--open=false",
            "--sqlite-db-filename",
            str(database_path),
            "--blob-store-dir",
            str(blob_store_directory),
        ]

    @property
    def environment(self) -> dict[str, str]:
        """What the engine adds to ``dexcli``'s environment."""
        return {SERVER_ZD_BINARY_VARIABLE: str(self.server_zd_binary)}


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _executable(text: str, source: str) -> Path:
    """``text`` as an executable file's path: a path, or a name on ``PATH``."""
    path = Path(text)
    if _is_executable(path):
        return path.resolve()
    found = shutil.which(text) if os.sep not in text else None
    if found is not None:
        return Path(found).resolve()
    raise FileNotFoundError(f"{source} names no executable file")


def _server_answers(address: str, timeout: timedelta, token: str | None = None) -> bool:
    metadata = bearer_metadata(token)
    with grpc.insecure_channel(address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        health_check = cast(Callable[..., object], stub.HealthCheck)
        try:
            health_check(empty_pb2.Empty(), timeout=timeout.total_seconds(), metadata=metadata)
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
        dexcli: DexcliEngine | None,
        startup_timeout: timedelta,
        owns_state_directory: bool,
        token: str | None = None,
    ) -> None:
        self.state_directory = state_directory
        self.database_path = state_directory / "dex.sqlite.db"
        self.log_path = state_directory / "engine.log"
        self.dexcli = dexcli
        """The ``dexcli`` binaries and ``-zd-config`` file, or ``None`` for the local engine."""
        self._startup_timeout = startup_timeout
        self._owns_state_directory = owns_state_directory
        self.token = token
        """The bearer token every call must carry (``serve --token-file``), or ``None``."""
        self._port = 0
        self._web_port = 0
        self._process: ChildProcess | None = None

    @classmethod
    def start(
        cls,
        state_directory: Path | str | None = None,
        *,
        startup_timeout: timedelta = DEFAULT_STARTUP_TIMEOUT,
        server_zd_config_path: Path | str | None = None,
        token: str | None = None,
    ) -> PrivateDexEngine:
        """Start an engine whose database lives in ``state_directory``.

        Without a directory, a temporary one is created and removed on ``close()``.
        With ``DEXCLI`` set it runs ``dexcli dev --engine zd`` (see the module); a
        missing ``dexcli``, ``dex-server-zd`` or ``server_zd_config_path`` raises
        ``FileNotFoundError`` before anything starts. ``server_zd_config_path`` is
        used only in that mode. ``token`` makes the local engine require that bearer
        token on every call (``serve --token-file``); give the host the same one
        (``AgentHost(auth_token=...)``). ``dexcli`` takes no token here: with ``DEXCLI``
        set, a token raises ``ValueError``.
        """
        dexcli_text = os.environ.get(DEXCLI_VARIABLE) or None
        if token is not None and (not isinstance(token, str) or not token.strip()):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("token must be a non-empty str or None")
        if token is not None and dexcli_text is not None:
            raise ValueError(f"a token needs the local engine; unset {DEXCLI_VARIABLE}")
        owns = state_directory is None
        directory = (
            Path(tempfile.mkdtemp(prefix="dex-engine-"))
            if state_directory is None
            else Path(state_directory)
        )
        try:
            dexcli = (
                DexcliEngine.resolve(
                    dexcli_text, directory, server_zd_config_path=server_zd_config_path
                )
                if dexcli_text is not None
                else None
            )
        except BaseException:
            if owns:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        directory.mkdir(parents=True, exist_ok=True)
        engine = cls(
            directory,
            dexcli=dexcli,
            startup_timeout=startup_timeout,
            owns_state_directory=owns,
            token=token,
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
        return self.dexcli is not None

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
        if self.dexcli is not None:
            self._launch_dexcli(self.dexcli)
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
        if self.token is not None:
            token_path = self.state_directory / "engine.token"
            token_path.write_text(self.token, encoding="utf-8")
            command += ["--token-file", str(token_path)]
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

    def _launch_dexcli(self, dexcli: DexcliEngine) -> None:
        if self._port == 0:
            self._port, self._web_port = find_free_loopback_ports(2)
        if dexcli.writes_zd_config:
            dexcli.zd_config_path.write_text(PROCESS_CRASH_SAFE_ZD_CONFIG, encoding="utf-8")
        command = dexcli.command(
            port=self._port,
            web_port=self._web_port,
            database_path=self.database_path,
            blob_store_directory=self.state_directory / "blobs",
        )
        self._process = ChildProcess.spawn(
            command, log_path=self.log_path, environment=dexcli.environment
        )

    def _wait_until_serving(self) -> None:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + self._startup_timeout.total_seconds()
        while not _server_answers(self.server_address, timedelta(seconds=1), self.token):
            if not process.is_running() or time.monotonic() >= deadline:
                log = process.read_log()
                process.kill()
                self._process = None
                raise RuntimeError(
                    f"the Dex engine at {self.server_address} did not answer a health check;"
                    f" log {self.log_path}:\n{log[-4000:]}"
                )
            time.sleep(0.1)
