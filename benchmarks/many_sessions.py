"""Many sessions on one engine: what a turn, memory, disk and a restart cost at 10 to 10,000.

One database grows through the sizes given by ``--sessions`` (default 10, 1,000 and
10,000 sessions). Most sessions are idle: each had ``--idle-turns`` turns (default 1)
and waits in ``AwaitUserMessage`` for the next user message. At every size a fresh set
of ``--active`` sessions (default 50; all of them when the size is smaller) plays the
read-tool turn (the Pydantic AI agent of ``agent_turns.py``: two model requests and one
read tool call), and then stays as idle sessions of the next size. Printed per size:

- the active sessions' turn p50/p99, one turn at a time (round robin over the active
  set, so a turn never waits for another), and their turns per second all at once;
- engine RSS and Worker RSS per idle session: the engine runs as its own process
  (``dex-local-engine serve``); the Worker, the Client and this script are the other
  (``--embedded`` runs the engine in this process: the latency of the default host,
  RSS then of the one process);
- SQLite bytes per session (the database, its WAL and shared-memory file);
- ``SearchFlows`` latency: the running sessions of the Flow type (a page of 100), one
  session by ``FlowId``, and the closed ones;
- engine cold start (SIGTERM, start on the same database, until it serves) and crash
  recovery (SIGKILL, the same) with the whole database, and the first turn of an idle
  session after each (the Worker reconnects by itself).

At the end ``--close`` (default: every idle session but the active ones of the largest
size) sessions are stopped, the engine restarts with ``--closed-flow-retention 0s`` and
purges them, and the database size is printed after the purge (the engine's incremental
vacuum returns the freed pages at once) and after a full ``VACUUM``.

Usage::

    uv run --group bench python benchmarks/many_sessions.py [--sessions 10,1000,10000]
        [--active 50] [--active-turns 4] [--idle-turns 1] [--embedded] [--json PATH]

Nothing here asserts a time; it measures and prints. Results go to ``benchmarks/results/``
as dated JSON unless ``--json`` names a file.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dex
from _engine import start_engine_process
from _results import load_average, write_results
from agent_turns import SessionConversation, percentile, pydantic_ai_agent

from dex_agents import AgentHost, AgentSessionFlow
from dex_agents_pydantic_ai import create_pydantic_ai_session_flow

FLOW_TYPE = "ManySessions"
START_BATCH = 25  # idle sessions started at once


# --- the engine as its own process ---------------------------------------------------------


@dataclass
class EngineProcess:
    """``dex-local-engine serve`` on a fixed port, restartable on the same database."""

    database: Path
    port: int = 0
    extra: list[str] = field(default_factory=list[str])
    process: subprocess.Popen[str] | None = None
    address: str = ""

    def start(self, *extra: str) -> float:
        """Start and wait until it serves; the seconds that took."""
        started = time.perf_counter()
        self.process, self.address = start_engine_process(
            self.database, *self.extra, *extra, port=self.port
        )
        seconds = time.perf_counter() - started
        self.port = int(self.address.rsplit(":", 1)[1])
        return seconds

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None:
            return
        self.process.send_signal(sig)
        self.process.wait(timeout=120)
        self.process = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


def rss_bytes(pid: int) -> int:
    for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def process_cpu(pid: int) -> float:
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_bytes(database: Path) -> int:
    return sum(
        path.stat().st_size
        for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm"))
        if path.exists()
    )


# --- the measurements ------------------------------------------------------------------------


@dataclass
class Level:
    sessions: int
    active: int
    idle: int = 0
    turn_p50_ms: float = 0.0
    turn_p99_ms: float = 0.0
    turn_mean_ms: float = 0.0
    cpu_ms_per_turn: float = 0.0  # this process (Worker, Client) plus the engine process
    engine_cpu_ms_per_turn: float = 0.0
    concurrent_turns_per_second: float = 0.0
    worker_rss_bytes: int = 0
    engine_rss_bytes: int = 0
    database_bytes: int = 0
    search: dict[str, float] = field(default_factory=dict[str, float])
    populate_seconds: float = 0.0

    def per_session(self, base: Level | None) -> dict[str, float | None]:
        """Bytes per idle session against the smallest size (its fixed costs taken out)."""
        if base is None or self.sessions <= base.sessions:
            return {}
        extra = self.sessions - base.sessions

        def per(now: int, then: int) -> float:
            return round((now - then) / extra, 1)

        return {
            "worker_rss_per_session_bytes": per(self.worker_rss_bytes, base.worker_rss_bytes),
            "engine_rss_per_session_bytes": (
                per(self.engine_rss_bytes, base.engine_rss_bytes) if self.engine_rss_bytes else None
            ),
            "database_per_session_bytes": per(self.database_bytes, base.database_bytes),
        }


class Bench:
    def __init__(self, arguments: argparse.Namespace, root: Path) -> None:
        self.arguments = arguments
        self.root = root
        self.database = root / "engine.sqlite"
        self.engine = EngineProcess(self.database, extra=list(arguments.engine_arg))
        self.flow: AgentSessionFlow = create_pydantic_ai_session_flow(
            pydantic_ai_agent("many"), FLOW_TYPE
        )
        self.idle_ids: list[str] = []
        self.counter = 0

    def new_id(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-{self.counter:06d}-{uuid.uuid4().hex[:6]}"

    async def populate(self, host: AgentHost, count: int) -> None:
        """``count`` more idle sessions, each after ``--idle-turns`` turns."""
        turns = self.arguments.idle_turns

        async def one() -> None:
            conversation = SessionConversation(host, self.flow)
            conversation.session_id = self.new_id("idle")
            if turns == 0:
                await conversation.sessions.start_session(conversation.session_id)
            for number in range(turns):
                await conversation.turn(f"hello {number}")
            self.idle_ids.append(conversation.session_id)

        for start in range(0, count, START_BATCH):
            await asyncio.gather(*(one() for _ in range(min(START_BATCH, count - start))))

    async def active_turns(self, host: AgentHost, level: Level) -> None:
        """A fresh active set: its first turn, then ``--active-turns`` timed turns one at a
        time round robin, then two turns each all at once."""
        conversations = [SessionConversation(host, self.flow) for _ in range(level.active)]
        for conversation in conversations:
            conversation.session_id = self.new_id("active")
        await asyncio.gather(*(c.turn("question 0") for c in conversations))
        seconds: list[float] = []
        cpu, engine_cpu = self.cpu()
        for number in range(1, self.arguments.active_turns + 1):
            for conversation in conversations:
                started = time.perf_counter()
                await conversation.turn(f"question {number}")
                seconds.append(time.perf_counter() - started)
        cpu_after, engine_cpu_after = self.cpu()
        level.cpu_ms_per_turn = round((cpu_after - cpu) * 1000 / len(seconds), 2)
        level.engine_cpu_ms_per_turn = round(
            (engine_cpu_after - engine_cpu) * 1000 / len(seconds), 2
        )
        ms = [value * 1000 for value in seconds]
        level.turn_p50_ms = round(statistics.median(ms), 2)
        level.turn_p99_ms = round(percentile(ms, 0.99), 2)
        level.turn_mean_ms = round(statistics.fmean(ms), 2)
        started = time.perf_counter()
        base = self.arguments.active_turns + 1
        await asyncio.gather(*(self._two_turns(c, base) for c in conversations))
        level.concurrent_turns_per_second = round(
            2 * len(conversations) / (time.perf_counter() - started), 1
        )
        self.idle_ids.extend(c.session_id for c in conversations)

    @staticmethod
    async def _two_turns(conversation: SessionConversation, base: int) -> None:
        await conversation.turn(f"question {base}")
        await conversation.turn(f"question {base + 1}")

    async def search(self, host: AgentHost) -> dict[str, float]:
        client = host.dex_client
        some_id = self.idle_ids[len(self.idle_ids) // 2]
        queries = {
            "running_page_100": f"FlowType = '{FLOW_TYPE}' AND ExecutionStatus = 'Running'",
            "by_flow_id": f"FlowId = '{some_id}'",
            "closed_page_100": f"FlowType = '{FLOW_TYPE}' AND ExecutionStatus != 'Running'",
        }
        figures: dict[str, float] = {}
        for name, query in queries.items():
            seconds: list[float] = []
            for _ in range(self.arguments.search_calls):
                started = time.perf_counter()
                await client.search_flows(query, 100)
                seconds.append(time.perf_counter() - started)
            figures[f"{name}_p50_ms"] = round(statistics.median(seconds) * 1000, 2)
        return figures

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: this process and the engine process together, and the
        engine's alone."""
        engine = process_cpu(self.engine.pid) if self.engine.pid is not None else 0.0
        return time.process_time() + engine, engine

    def memory(self, level: Level) -> None:
        gc.collect()
        level.worker_rss_bytes = rss_bytes(os.getpid())
        if self.engine.pid is not None:
            level.engine_rss_bytes = rss_bytes(self.engine.pid)
        level.database_bytes = database_bytes(self.database)

    async def restart(self, host: AgentHost, sig: int) -> dict[str, float]:
        """Stop the engine with ``sig``, start it on the same database, and time it serving
        and an idle session's next turn."""
        self.engine.stop(sig)
        ready = self.engine.start()
        conversation = SessionConversation(host, self.flow)
        conversation.session_id = self.idle_ids[0]
        conversation.turns = 1  # an idle session: its next turn, not a start
        conversation.token = await conversation.sessions.latest_event_token(conversation.session_id)
        started = time.perf_counter()
        await conversation.turn("after the restart")
        return {
            "seconds_until_serving": round(ready, 3),
            "first_turn_after_ms": round((time.perf_counter() - started) * 1000, 1),
            "engine_rss_bytes_after": rss_bytes(self.engine.pid or 0),
        }

    async def close_and_purge(self, host: AgentHost, keep: int) -> dict[str, Any]:
        to_close = self.idle_ids[: max(0, len(self.idle_ids) - keep)]
        before = database_bytes(self.database)
        started = time.perf_counter()
        for start in range(0, len(to_close), 50):
            await asyncio.gather(
                *(
                    host.dex_client.stop_flow(
                        flow_id, dex.StopFlowOptions(dex.StopType.TERMINATE, "closed")
                    )
                    for flow_id in to_close[start : start + 50]
                )
            )
        close_seconds = time.perf_counter() - started
        self.engine.stop()
        purge = self.engine.start("--closed-flow-retention", "0s")
        after_purge = database_bytes(self.database)
        self.engine.stop()
        with sqlite3.connect(self.database) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpointed = database_bytes(self.database)
        with sqlite3.connect(self.database, isolation_level=None) as db:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        vacuumed = database_bytes(self.database)
        self.engine.start()
        return {
            "closed_sessions": len(to_close),
            "close_seconds": round(close_seconds, 2),
            "database_bytes_before": before,
            "engine_start_with_purge_seconds": round(purge, 3),
            "database_bytes_after_purge": after_purge,
            "database_bytes_after_checkpoint": checkpointed,
            "database_bytes_after_vacuum": vacuumed,
            "kept_sessions": len(self.idle_ids) - len(to_close),
        }


async def measure(arguments: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted({int(text) for text in arguments.sessions.split(",") if text.strip()})
    with tempfile.TemporaryDirectory(prefix="dex-agents-many-sessions-") as temporary:
        root = arguments.directory or Path(temporary)
        root.mkdir(parents=True, exist_ok=True)
        bench = Bench(arguments, root)
        address: str | None = None
        if not arguments.embedded:
            bench.engine.start()
            address = bench.engine.address
        levels: list[Level] = []
        restarts: dict[str, Any] = {}
        purge: dict[str, Any] = {}
        async with AgentHost(bench.flow, server_address=address, database=bench.database) as host:
            for size in sizes:
                active = min(arguments.active, size)
                level = Level(size, active)
                started = time.perf_counter()
                await bench.populate(host, size - active - len(bench.idle_ids))
                level.populate_seconds = round(time.perf_counter() - started, 1)
                level.idle = len(bench.idle_ids)
                bench.memory(level)
                await bench.active_turns(host, level)
                level.search = await bench.search(host)
                levels.append(level)
                print(
                    f"{size:>6} sessions ({level.idle} idle, {active} active): turn p50"
                    f" {level.turn_p50_ms} ms p99 {level.turn_p99_ms} ms, CPU"
                    f" {level.cpu_ms_per_turn} ms/turn (engine {level.engine_cpu_ms_per_turn}),"
                    f" {level.concurrent_turns_per_second} turns/s at once;"
                    f" Worker RSS {level.worker_rss_bytes / 2**20:.1f} MiB,"
                    f" engine RSS {level.engine_rss_bytes / 2**20:.1f} MiB,"
                    f" database {level.database_bytes / 2**20:.1f} MiB; search {level.search}",
                    flush=True,
                )
            if not arguments.embedded:
                restarts["cold_start"] = await bench.restart(host, signal.SIGTERM)
                restarts["crash_recovery"] = await bench.restart(host, signal.SIGKILL)
                print(f"restarts with {sizes[-1]} sessions: {restarts}", flush=True)
                if arguments.close:
                    purge = await bench.close_and_purge(host, keep=arguments.active)
                    print(f"closed and purged: {purge}", flush=True)
        bench.engine.stop()
    base = levels[0] if levels else None
    return {
        "turn": "Pydantic AI, 2 model requests + 1 read tool call",
        "engine": "embedded (this process)" if arguments.embedded else "its own process",
        "idle_turns": arguments.idle_turns,
        "active_turns": arguments.active_turns,
        "levels": [{**level.__dict__, **level.per_session(base)} for level in levels],
        "turn_p50_ratio_largest_to_smallest": (
            round(levels[-1].turn_p50_ms / levels[0].turn_p50_ms, 2) if len(levels) > 1 else None
        ),
        "restarts": restarts,
        "retention": purge,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="10,1000,10000", help="sizes, comma-separated")
    parser.add_argument("--active", type=int, default=50)
    parser.add_argument("--active-turns", type=int, default=4, help="timed turns per active")
    parser.add_argument("--idle-turns", type=int, default=1, help="turns before going idle")
    parser.add_argument("--search-calls", type=int, default=20)
    parser.add_argument("--embedded", action="store_true", help="the engine in this process")
    parser.add_argument(
        "--no-close", dest="close", action="store_false", help="skip closing and purging"
    )
    parser.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        help="an option for dex-local-engine serve (repeatable), "
        "e.g. --engine-arg=--attribute-cache-flows=64",
    )
    parser.add_argument(
        "--directory", type=Path, help="keep the database there (default: a temporary one)"
    )
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args(argv)
    load = load_average()
    results = asyncio.run(measure(arguments))
    write_results("many_sessions", results, arguments.json, load_at_start=load)


if __name__ == "__main__":
    main()
