"""Starts a stdio MCP server so that it dies with the Worker that started it.

Run as a script, not imported: ``python -I _launcher.py WORKER_PID NAME COMMAND ARGS...``.
The MCP SDK starts it in a new session (its own process group), as it would start the
server itself. It starts the server as its child in that group, with the server's stdin
and stdout passed straight through, and relays the server's stderr to the Worker's,
each line prefixed with ``[mcp server NAME]``. When the Worker dies, Linux sends this
process a parent-death signal (``PR_SET_PDEATHSIG``), and it kills its whole process
group with ``SIGKILL``, the server and anything it started included; elsewhere it
notices the new parent within half a second. The server itself gets ``SIGKILL`` when
this process dies. When the server exits, this process exits with the server's code.

Standard library only, so it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys

_PR_SET_PDEATHSIG = 1
_DEATH_SIGNAL = signal.SIGUSR2
_POLL_SECONDS = 0.5


def _kill_group(*_: object) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _watch_parent(death_signal: int) -> None:
    """Have Linux send ``death_signal`` when the parent dies (kept across ``exec``)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the poll below still notices


def main(argv: list[str]) -> int:
    worker_pid, name, command, *args = argv
    signal.signal(_DEATH_SIGNAL, _kill_group)
    _watch_parent(int(_DEATH_SIGNAL))
    if os.getppid() != int(worker_pid):
        _kill_group()  # the Worker died before the watch was set
    # The SDK stops the server with SIGTERM to the group, after closing its stdin; this
    # process stays until the server has exited, so the relay carries its last words.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        os.dup2(write_end, 2)
        os.close(write_end)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(_DEATH_SIGNAL, signal.SIG_DFL)
        # Should this launcher be killed outright, the server goes with it.
        _watch_parent(int(signal.SIGKILL))
        try:
            os.execvp(command, [command, *args])
        except OSError as error:
            os.write(2, f"cannot start {command}: {error}\n".encode())
            os._exit(127)
    os.close(write_end)
    # The server owns stdin and stdout; this process keeps neither open.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    prefix = f"[mcp server {name}] ".encode()
    pending = b""
    while True:
        ready, _, _ = select.select([read_end], [], [], _POLL_SECONDS)
        if os.getppid() != int(worker_pid):
            _kill_group()
        if not ready:
            continue
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            _write_stderr(prefix + line + b"\n")
    if pending:
        _write_stderr(prefix + pending + b"\n")
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


def _write_stderr(data: bytes) -> None:
    # The Worker's stderr may be gone; the server keeps running regardless.
    with contextlib.suppress(OSError):
        os.write(2, data)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
