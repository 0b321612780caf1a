"""Where a benchmark's figures go: dated JSON under ``benchmarks/results/`` with the machine.

Every script calls :func:`write_results` at its end. ``--json PATH`` names the file;
without it the figures go to ``benchmarks/results/<date>-<script>-<host>.json`` (a
second run the same day gets ``-2``, ``-3``, ...), so the runs that the README quotes
stay in the repository beside it. The machine facts (CPU model and count, Python,
platform, the dex SDK release, the git commit, load averages before and after) are
added to the figures, because a figure without its load means little on a shared
machine.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


_COMMIT_AT_START = _git_commit()  # the code the run started with (imported at start)


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "dex_python_sdk": _package("dex-python-sdk"),
        "git_commit": _COMMIT_AT_START,
        "git_commit_at_end": _git_commit(),
    }


def default_path(script: str) -> Path:
    """``benchmarks/results/<date>-<script>-<host>[-n].json``, not yet taken."""
    day = datetime.date.today().isoformat()
    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in platform.node())[:40]
    stem = f"{day}-{script}-{host or 'machine'}"
    path = RESULTS / f"{stem}.json"
    number = 2
    while path.exists():
        path = RESULTS / f"{stem}-{number}.json"
        number += 1
    return path


def write_results(
    script: str,
    results: Mapping[str, Any],
    path: Path | None,
    *,
    load_at_start: list[float] | None = None,
) -> Path:
    """Write ``results`` with the machine facts to ``path`` (or the dated default); print
    where, and return the path."""
    document: dict[str, Any] = {
        "script": script,
        "machine": machine_facts(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": load_average(),
        **results,
    }
    target = path if path is not None else default_path(script)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2) + "\n")
    print(f"results written to {target}")
    return target
