"""Worker children forked from a warm process, so a kill costs a fork, not a cold start.

Starting a Worker child means importing every framework it hosts, which takes
seconds of CPU; a fuzzer that kills Workers hundreds of times would spend its
run on imports. ``WorkerForkServer`` starts one process that imports and builds
the Flows once, then forks a fresh Worker per request. Each fork is a real
Worker process on the real SDK (it opens its own gRPC channel after the fork;
the server process never opens one), and ``ForkedWorker.kill`` SIGKILLs it.

The server reads one log path per line on stdin (optionally followed by a tab and
the server address that Worker uses instead of ``DEX_SERVER_ADDRESS``), forks a
Worker that writes to that file, and answers with the child's PID. Children are
reaped automatically.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex

from dex_agents._host import SERVER_ADDRESS_VARIABLE
from dex_agents._host_options import DEFAULT_REGISTRATION_TIMEOUT
from dex_agents.testing._worker_process import WORKER_READY_LINE, run_agent_worker_process

__all__ = ["FORK_SERVER_READY_LINE", "ForkedWorker", "WorkerForkServer", "serve_forks"]

FORK_SERVER_READY_LINE = "dex-agents fork server ready"


def serve_forks(flows: Sequence[dex.Flow[Any]]) -> int:
    """Body of the fork server: fork a Worker serving ``flows`` per log path on stdin."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    print(FORK_SERVER_READY_LINE, flush=True)
    for line in sys.stdin:
        log_path, _, server_address = line.strip().partition("\t")
        if not log_path:
            continue
        pid = os.fork()
        if pid == 0:
            if server_address:
                os.environ[SERVER_ADDRESS_VARIABLE] = server_address
            _become_worker(flows, Path(log_path))
        print(pid, flush=True)
    return 0


def _become_worker(flows: Sequence[dex.Flow[Any]], log_path: Path) -> None:
    """In the forked child: log to ``log_path`` and serve until killed; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # leave the server's process group: a kill hits this Worker only
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        run_agent_worker_process(flows)
        code = 0
    finally:
        os._exit(code)


class ForkedWorker:
    """A Worker forked by a ``WorkerForkServer``; ``kill()`` is SIGKILL."""

    def __init__(self, pid: int, log_path: Path) -> None:
        self.pid = pid
        self.log_path = log_path

    def is_running(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM: the Worker drains its running tasks and exits (see ``is_running``)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_until_ready(self, timeout: timedelta) -> None:
        """Wait for the Worker's ready line; fail at once if it exits first."""
        deadline = time.monotonic() + timeout.total_seconds()
        while WORKER_READY_LINE not in self.read_log():
            if not self.is_running():
                raise RuntimeError(
                    f"Worker {self.pid} exited before it was ready:\n{self.read_log()}"
                )
            if time.monotonic() >= deadline:
                self.kill()
                raise TimeoutError(f"Worker {self.pid} was not ready within {timeout}")
            time.sleep(0.05)  # the child writes only to its log file: nothing to wait on


class WorkerForkServer:
    """The parent's handle on a fork server; ``fork()`` starts a Worker and waits for it."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process
        self._lock = threading.Lock()
        self._workers: list[ForkedWorker] = []

    @classmethod
    def start(
        cls,
        command: Sequence[str],
        *,
        server_address: str,
        log_path: Path,
        environment: Mapping[str, str] | None = None,
    ) -> WorkerForkServer:
        """Run ``command`` (a process that ends in ``serve_forks``) and wait until it is warm."""
        log = log_path.open("ab")
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **(environment or {}), SERVER_ADDRESS_VARIABLE: server_address},
        )
        log.close()
        server = cls(process)
        line = server._read_line()
        if line != FORK_SERVER_READY_LINE:
            server.close()
            raise RuntimeError(f"the fork server did not start (said {line!r}); log {log_path}")
        return server

    def spawn(self, log_path: Path, server_address: str | None = None) -> ForkedWorker:
        """Fork a Worker logging to ``log_path`` (on ``server_address`` when given, else
        the server's); it is still starting when this returns."""
        with self._lock:
            stdin = self._process.stdin
            assert stdin is not None
            stdin.write(f"{log_path}\t{server_address}\n" if server_address else f"{log_path}\n")
            stdin.flush()
            worker = ForkedWorker(int(self._read_line()), log_path)
            self._workers.append(worker)
        return worker

    def fork(
        self, log_path: Path, ready_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT
    ) -> ForkedWorker:
        """Fork a Worker logging to ``log_path`` and return once it registered."""
        worker = self.spawn(log_path)
        worker.wait_until_ready(ready_timeout)
        return worker

    def close(self) -> None:
        """Kill every Worker forked here, then the server."""
        for worker in self._workers:
            worker.kill()
        self._process.kill()
        self._process.wait()

    def _read_line(self) -> str:
        stdout = self._process.stdout
        assert stdout is not None
        return stdout.readline().strip()
