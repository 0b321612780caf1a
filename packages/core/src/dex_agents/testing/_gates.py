"""Cross-process coordination through files: gates that pause Worker code, and a run log.

A tool or model running in a Worker child process cannot share memory with the
test, so both sides meet in a state directory. ``FileGate`` lets the test wait
until Worker code reached an exact point, act (for example SIGKILL the Worker),
and then let it continue. ``InvocationLog`` counts how often a tool really ran,
across every process and restart.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")
_GATE_POLL_SECONDS = 0.02


def _checked_name(name: str) -> str:
    if not _NAME_PATTERN.fullmatch(name):
        raise ValueError(f"name must use only letters, digits, '_', '.', '-': {name!r}")
    return name


def _append_line(path: Path, line: str) -> None:
    # One locked O_APPEND write per line, so concurrent processes never interleave. No fsync:
    # a killed process loses nothing the kernel already has, and tests never outlive the host.
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, (line + "\n").encode())
    finally:
        os.close(descriptor)


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    # A line without its newline is still being written; leave it for the next read.
    return text.split("\n")[:-1]


class FileGate:
    """A named gate in ``directory`` that Worker code passes only once the test opens it.

    Worker side: ``pass_through()`` (or ``await pass_through_async()``) records that
    the gate was reached, then blocks until it is open. Test side:
    ``wait_until_reached()``, then act, then ``release()``. A released gate stays
    open, so a rerun after a Worker restart passes straight through.
    """

    def __init__(self, directory: Path | str, name: str) -> None:
        self.directory = Path(directory)
        self.name = _checked_name(name)

    @property
    def _reached_path(self) -> Path:
        return self.directory / f"gate-{self.name}.reached"

    @property
    def _open_path(self) -> Path:
        return self.directory / f"gate-{self.name}.open"

    def mark_reached(self) -> None:
        """Record one arrival at the gate (each arrival counts once)."""
        _append_line(self._reached_path, str(os.getpid()))

    def reached_count(self) -> int:
        return len(_read_lines(self._reached_path))

    def is_open(self) -> bool:
        return self._open_path.exists()

    def release(self) -> None:
        """Open the gate: every current and later arrival passes."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open_path.touch()

    def pass_through(self, timeout: timedelta = timedelta(minutes=5)) -> None:
        """Mark the arrival and block this thread until the gate is open."""
        self.mark_reached()
        deadline = time.monotonic() + timeout.total_seconds()
        while not self.is_open():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"gate {self.name!r} stayed closed for {timeout}")
            time.sleep(_GATE_POLL_SECONDS)

    async def pass_through_async(self, within: timedelta = timedelta(minutes=5)) -> None:
        """Mark the arrival and wait, without blocking the event loop, until the gate is open."""
        self.mark_reached()
        deadline = time.monotonic() + within.total_seconds()
        while not self.is_open():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"gate {self.name!r} stayed closed for {within}")
            await asyncio.sleep(_GATE_POLL_SECONDS)

    async def wait_until_reached(
        self, count: int = 1, within: timedelta = timedelta(seconds=60)
    ) -> None:
        """Wait until the gate has been reached ``count`` times in all."""
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        deadline = time.monotonic() + within.total_seconds()
        while self.reached_count() < count:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"gate {self.name!r} was reached {self.reached_count()} of {count}"
                    f" times within {within}"
                )
            await asyncio.sleep(_GATE_POLL_SECONDS)


@dataclass(frozen=True)
class Invocation:
    """One real run of a tool, as a tool recorded it."""

    tool_name: str
    idempotency_key: str | None
    pid: int
    details: Mapping[str, Any] = field(default_factory=dict[str, Any])


class InvocationLog:
    """An append-only JSON-lines log of tool runs, shared by every process using ``path``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def record(
        self,
        tool_name: str,
        *,
        idempotency_key: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one run; ``details`` must be JSON-serializable."""
        if not tool_name:
            raise ValueError("tool_name must not be empty")
        entry = {
            "tool_name": tool_name,
            "idempotency_key": idempotency_key,
            "pid": os.getpid(),
            "details": dict(details or {}),
        }
        _append_line(self.path, json.dumps(entry, sort_keys=True))

    def invocations(self, tool_name: str | None = None) -> list[Invocation]:
        """Every recorded run in order, optionally only those of ``tool_name``."""
        result: list[Invocation] = []
        for line in _read_lines(self.path):
            entry = json.loads(line)
            if tool_name is None or entry["tool_name"] == tool_name:
                result.append(
                    Invocation(
                        tool_name=entry["tool_name"],
                        idempotency_key=entry["idempotency_key"],
                        pid=entry["pid"],
                        details=entry["details"],
                    )
                )
        return result

    def count(self, tool_name: str) -> int:
        return len(self.invocations(tool_name))
