"""How long ``dex-agents-ai-agent`` takes to start: from the command's start to the
printed URL, to the first answer of the page, and to the Portal listing the demo MCP
servers' tools (they are listed in the background, so the page answers before).

    uv run python examples/ai-agent/benchmarks/startup.py [--runs 3] [-- extra flags]

Each run starts the command in a fresh directory (a new SQLite file) and stops it.
It prints one line per run and the median; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import httpx

from dex_agents.testing import find_free_loopback_ports

PREFIX = "/products/ai-agent"


def one_run(extra: list[str]) -> tuple[float, float, float]:
    (port,) = find_free_loopback_ports(1)
    command = [sys.executable, "-m", "dex_agents_ai_agent.main", "--port", str(port), *extra]
    with tempfile.TemporaryDirectory() as directory:
        began = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("AI Agent: "):
                    break
            printed = time.perf_counter() - began
            base = f"http://127.0.0.1:{port}{PREFIX}"
            with httpx.Client(timeout=30) as client:
                page = _first(lambda: client.get(f"{base}/").status_code == 200) - began
                tools = _first(lambda: not client.get(f"{base}/portal").json()["toolsPending"])
            return printed, page, tools - began
        finally:
            process.terminate()
            process.wait(60)


def _first(ready: Callable[[], bool]) -> float:
    """The time ``ready()`` first holds, polling every 20 ms."""
    while True:
        try:
            if ready():
                return time.perf_counter()
        except httpx.TransportError:
            pass
        time.sleep(0.02)  # polling the port until it listens


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="flags for the command, after --")
    arguments = parser.parse_args()
    rows = [one_run(arguments.extra) for _ in range(arguments.runs)]
    print("run  url printed  page answers  tools listed   (seconds from the command's start)")
    for number, (printed, page, tools) in enumerate(rows, 1):
        print(f"{number:>3}  {printed:>11.2f}  {page:>12.2f}  {tools:>12.2f}")
    medians = [statistics.median(column) for column in zip(*rows, strict=True)]
    print(f"med  {medians[0]:>11.2f}  {medians[1]:>12.2f}  {medians[2]:>12.2f}")


if __name__ == "__main__":
    main()
