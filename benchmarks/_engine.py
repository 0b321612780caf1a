"""The local engine as a child process, for the benchmarks that measure across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def start_engine_process(
    database: Path, *extra: str, port: int = 0
) -> tuple[subprocess.Popen[str], str]:
    """``dex-local-engine serve`` on ``database``, once it serves: the process and its
    ``host:port``. ``port`` 0 lets the engine pick one; ``extra`` are more serve options."""
    command = [
        sys.executable,
        "-m",
        "dex_local_engine",
        "serve",
        "--db",
        str(database),
        "--port",
        str(port),
        "--log-level",
        "WARNING",
        *extra,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "ready on" not in line:
        process.kill()
        process.wait()
        raise RuntimeError(f"the engine did not start: {line!r}")
    return process, line.split("ready on", 1)[1].split()[0]
