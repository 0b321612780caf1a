"""Child processes in their own process groups, killed when the test process exits.

Engines and Workers run as children so that a test can SIGKILL them at an exact
point. Each child leads its own process group, so a kill also reaches anything
the child started. Every child still alive when the test process exits gets
SIGKILL from an ``atexit`` hook; on Linux a child started from the main thread
also gets SIGKILL from the kernel if the test process itself dies (``setpriv``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

_live_children: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _kill_all_children() -> None:
    with _live_lock:
        children = list(_live_children)
        _live_children.clear()
    for child in children:
        if child.poll() is None:
            _kill_group(child)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)


atexit.register(_kill_all_children)


def _die_with_parent_prefix() -> list[str]:
    """A command prefix asking Linux to SIGKILL the child when the test process dies.

    ``setpriv --pdeathsig`` does it before exec. A ``preexec_fn`` cannot: Python
    code between fork and exec deadlocks when other threads (gRPC's) hold locks.
    The signal follows the thread that forked, so only the main thread uses it.
    """
    if not sys.platform.startswith("linux"):
        return []
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


class ChildProcess:
    """One child process leading its own process group, with output in a log file."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        command: Sequence[str],
        log_path: Path,
        log_offset: int,
    ) -> None:
        self._process = process
        self.command = tuple(command)
        self.log_path = log_path
        self._log_offset = log_offset

    @classmethod
    def spawn(
        cls,
        command: Sequence[str],
        *,
        log_path: Path,
        environment: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ChildProcess:
        """Start ``command`` with stdout and stderr appended to ``log_path``."""
        if not command:
            raise ValueError("command must not be empty")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(environment or {})
        env.setdefault("PYTHONUNBUFFERED", "1")
        with log_path.open("ab") as log:
            log_offset = log.tell()
            process = subprocess.Popen(
                [*_die_with_parent_prefix(), *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        with _live_lock:
            _live_children.add(process)
        return cls(process, command, log_path, log_offset)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def is_running(self) -> bool:
        return self._process.poll() is None

    def read_log(self) -> str:
        """What this child wrote so far (earlier runs sharing the log file excluded)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group and reap the child."""
        _kill_group(self._process)
        self._reap(timedelta(seconds=10))

    def terminate(self, grace: timedelta = timedelta(seconds=30)) -> int | None:
        """SIGTERM the process group, wait up to ``grace``, then SIGKILL what is left."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=grace.total_seconds())
            except subprocess.TimeoutExpired:
                _kill_group(self._process)
        # Children of the child may still linger in the group after a clean exit.
        _kill_group(self._process)
        return self._reap(timedelta(seconds=10))

    def wait_for_log_line(self, prefix: str, timeout: timedelta) -> str:
        """Wait until a log line starts with ``prefix`` and return it.

        Fails at once, with the log, if the child exits first.
        """
        deadline = time.monotonic() + timeout.total_seconds()
        while True:
            for line in self.read_log().splitlines():
                if line.startswith(prefix):
                    return line
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"{self.command[0]} exited with code {self._process.returncode} before"
                    f" printing {prefix!r}; log {self.log_path}:\n{self._log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self.command[0]} did not print {prefix!r} within"
                    f" {timeout.total_seconds():g}s; log {self.log_path}:\n{self._log_tail()}"
                )
            time.sleep(0.05)

    def _log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.read_log().splitlines()[-lines:])

    def _reap(self, timeout: timedelta) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=timeout.total_seconds())
        with _live_lock:
            _live_children.discard(self._process)
        return self._process.poll()
