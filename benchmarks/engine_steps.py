"""Step and RPC throughput and latency of the local Dex engine.

Runs an embedded ``LocalEngine`` with a real pull-mode ``AsyncWorker`` and an
``AsyncClient`` in this process and measures:

(a) one Flow of N trivial Steps in sequence (default 1,000): Steps per second
    and per-Step latency, taken as the gap between the moments consecutive
    Steps start executing (each Step records ``perf_counter`` on entry);
(b) F concurrent Flows of S Steps each (default 200 x 20): Steps per second
    from the first start to the last Flow result, plus the same per-Step gaps;
(c) ``invoke_rpc`` round trips on a running Flow (default 500 calls, one at a
    time): p50 and p99.

Each run measures the engine in four configurations, one after the other:
embedded (a thread of this process, sharing the GIL with the Worker and the
Client), on the Worker's own loop (``loop``, by loopback gRPC; ``inproc``, through
the in-process channel) and as a ``dex-local-engine serve`` child process, each in both
durability modes (``process-crash``: SQLite ``synchronous=NORMAL``;
``power-loss``: ``synchronous=FULL``, an fsync per commit). Interleaved with
them, it runs the same trivial workloads on DBOS over SQLite (one workflow of N
``@DBOS.step`` calls; F workflows of S steps at once) and prints every engine
figure as a ratio to DBOS's figure of the same round.

Usage::

    uv run --group bench python benchmarks/engine_steps.py [--json PATH] [--rounds N]
        [--configs embedded/process-crash,process/power-loss,...] [--no-dbos]
        [--memoize-sdk-version]

``dbos`` is a benchmark-only dependency (the ``bench`` dependency group, not
installed by a plain ``uv sync``); without it the DBOS rows are skipped.
``--memoize-sdk-version`` applies ``dex_local_engine.sdk_patches.memoize_sdk_version``
first, to measure what the SDK's per-stream version lookup costs.

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    Context,
    Flow,
    PullWorkerOptions,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    WorkerOptions,
    dead_end,
    go_to,
    graceful_complete,
    open_blob_cache,
    rpc,
)

from dex_local_engine import EngineServer, LocalEngine
from dex_local_engine.sdk_patches import memoize_sdk_version, route_in_process_channels

# flow_id -> perf_counter() at the start of every Step execution, in order.
STEP_STARTS: defaultdict[str, list[float]] = defaultdict(list)

# The engine child process of the configuration being measured, if any: its CPU
# time counts towards the CPU per Step as well.
ENGINE_CHILD: list[int] = []


def cpu_seconds() -> float:
    """CPU time of this process (every thread) plus the engine child's, if any."""
    total = time.process_time()
    for pid in ENGINE_CHILD:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime and stime are fields 14 and 15 of /proc/<pid>/stat, in clock ticks.
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def cpu_per_unit_ms(cpu_before: float, units: int) -> float:
    """CPU milliseconds (this process and the engine child) per Step or call."""
    return round((cpu_seconds() - cpu_before) * 1000 / units, 3)


class HopStep(Step[int]):
    """Counts down; each execution is one Step of the chain."""

    def execute(self, context: Context, input: int) -> StepDecision:
        STEP_STARTS[context.flow_id].append(time.perf_counter())
        if input <= 1:
            return graceful_complete(input)
        return go_to(HopStep, input - 1)


class ChainFlow(Flow[int]):
    def __init__(self) -> None:
        self.hop = HopStep()

    def get_steps(self) -> StepList[int]:
        return StepList[int].start_step(self.hop)


class IdleStep(Step[int]):
    """Leaves the Flow running with nothing active, so it only serves RPCs."""

    def execute(self, context: Context, input: int) -> StepDecision:
        del context, input
        return dead_end()


class EchoFlow(Flow[int]):
    def __init__(self) -> None:
        self.idle = IdleStep()

    def get_steps(self) -> StepList[int]:
        return StepList[int].start_step(self.idle)

    @rpc
    def echo(self, context: Context, input: int) -> RPCResult[int]:
        del context
        return RPCResult(input)


@dataclass
class Figures:
    machine: dict[str, Any] = field(default_factory=dict[str, Any])
    settings: dict[str, Any] = field(default_factory=dict[str, Any])
    sequential: dict[str, float] = field(default_factory=dict[str, float])
    concurrent: dict[str, float] = field(default_factory=dict[str, float])
    rpc: dict[str, float] = field(default_factory=dict[str, float])


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def gap_stats_ms(starts: Sequence[float]) -> dict[str, float]:
    gaps = [(later - earlier) * 1000 for earlier, later in pairwise(starts)]
    if not gaps:
        return {}
    return {
        "step_latency_p50_ms": round(statistics.median(gaps), 3),
        "step_latency_p99_ms": round(percentile(gaps, 0.99), 3),
        "step_latency_max_ms": round(max(gaps), 3),
    }


def machine_description() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


async def run_sequential(client: AsyncClient, flow: ChainFlow, steps: int) -> dict[str, float]:
    flow_id = f"bench-chain-{uuid.uuid4()}"
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    await client.start_flow(flow, flow_id, steps)
    result = await client.wait_for_flow(flow_id, timedelta(minutes=10))
    elapsed = time.perf_counter() - started
    starts = STEP_STARTS.pop(flow_id, [])
    if result.status.name != "COMPLETED" or len(starts) != steps:
        raise RuntimeError(f"chain Flow ended {result.status.name} after {len(starts)} Steps")
    return {
        "steps": steps,
        "seconds": round(elapsed, 3),
        "steps_per_second": round(steps / elapsed, 1),
        "cpu_per_step_ms": cpu_per_unit_ms(cpu_before, steps),
        **gap_stats_ms(starts),
    }


async def run_concurrent(
    client: AsyncClient, flow: ChainFlow, flows: int, steps: int
) -> dict[str, float]:
    flow_ids = [f"bench-fanout-{index}-{uuid.uuid4()}" for index in range(flows)]
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(client.start_flow(flow, flow_id, steps) for flow_id in flow_ids))
    results = await asyncio.gather(
        *(client.wait_for_flow(flow_id, timedelta(minutes=10)) for flow_id in flow_ids)
    )
    elapsed = time.perf_counter() - started
    total = 0
    latencies: list[dict[str, float]] = []
    for flow_id, result in zip(flow_ids, results, strict=True):
        starts = STEP_STARTS.pop(flow_id, [])
        if result.status.name != "COMPLETED" or len(starts) != steps:
            raise RuntimeError(f"{flow_id} ended {result.status.name} after {len(starts)} Steps")
        total += len(starts)
        latencies.append(gap_stats_ms(starts))
    p50s = [entry["step_latency_p50_ms"] for entry in latencies if entry]
    return {
        "flows": flows,
        "steps_per_flow": steps,
        "steps": total,
        "seconds": round(elapsed, 3),
        "steps_per_second": round(total / elapsed, 1),
        "cpu_per_step_ms": cpu_per_unit_ms(cpu_before, total),
        "median_of_flow_step_latency_p50_ms": round(statistics.median(p50s), 3),
    }


async def run_rpc(client: AsyncClient, flow: EchoFlow, calls: int) -> dict[str, float]:
    flow_id = f"bench-rpc-{uuid.uuid4()}"
    await client.start_flow(flow, flow_id, 0)
    for warmup in range(20):
        await client.invoke_rpc(flow.echo, flow_id, warmup)
    samples: list[float] = []
    cpu_before = cpu_seconds()
    for index in range(calls):
        before = time.perf_counter()
        output = await client.invoke_rpc(flow.echo, flow_id, index)
        samples.append((time.perf_counter() - before) * 1000)
        if output != index:
            raise RuntimeError(f"echo returned {output!r} for {index}")
    cpu_per_call = cpu_per_unit_ms(cpu_before, calls)
    await client.stop_flow(flow_id)
    return {
        "calls": calls,
        "cpu_per_call_ms": cpu_per_call,
        "rpc_p50_ms": round(statistics.median(samples), 3),
        "rpc_p99_ms": round(percentile(samples, 0.99), 3),
        "rpc_max_ms": round(max(samples), 3),
    }


async def measure(arguments: argparse.Namespace, address: str) -> Figures:
    chain, echo = ChainFlow(), EchoFlow()
    registry = Registry([chain, echo])
    with tempfile.TemporaryDirectory(prefix="dex-bench-cache-") as cache_directory:
        cache = open_blob_cache(BlobCacheConfig(cache_directory, 64 * 1024 * 1024))
        pull = PullWorkerOptions(
            max_concurrent_tasks=arguments.worker_tasks,
            idle_streams_per_queue=arguments.idle_streams,
        )
        worker = AsyncWorker(registry, cache, WorkerOptions(server_address=address, pull=pull))
        worker_task = asyncio.create_task(worker.start())
        client: AsyncClient | None = None
        try:
            await worker.wait_pull_registered(timeout=30)
            client = AsyncClient(registry, cache, ClientOptions(address, worker.worker_target))
            figures = Figures()
            # Warm up code paths and SQLite pages before measuring.
            await run_sequential(client, chain, 50)
            figures.sequential = await run_sequential(client, chain, arguments.steps)
            print(f"(a) sequential: {figures.sequential}", flush=True)
            figures.concurrent = await run_concurrent(
                client, chain, arguments.flows, arguments.flow_steps
            )
            print(f"(b) concurrent: {figures.concurrent}", flush=True)
            figures.rpc = await run_rpc(client, echo, arguments.rpc_calls)
            print(f"(c) rpc: {figures.rpc}", flush=True)
            return figures
        finally:
            if client is not None:
                await client.close()
            await worker.close()
            try:
                await asyncio.wait_for(worker_task, timeout=30)
            finally:
                cache.close()


READY_LINE = re.compile(r"dex-local-engine ready on (\S+) ")


@contextmanager
def engine_address(database: str, separate_process: bool, durability: str) -> Generator[str]:
    """Yield the address of a running engine: embedded, or a child process."""
    if not separate_process:
        with LocalEngine(
            database=database, host="127.0.0.1", port=0, durability=durability
        ) as engine:
            yield str(engine.address)
        return
    command = [sys.executable, "-m", "dex_local_engine", "serve", "--log-level", "WARNING"]
    command += ["--host", "127.0.0.1", "--port", "0", "--db", database]
    command += ["--durability", durability]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    ENGINE_CHILD.append(child.pid)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = READY_LINE.search(line)
        if match is None:
            raise RuntimeError(f"engine did not start: {line!r}")
        yield match.group(1)
    finally:
        ENGINE_CHILD.remove(child.pid)
        child.terminate()
        child.wait(timeout=30)


CONFIGS = (
    "embedded/process-crash",
    "embedded/power-loss",
    "loop/process-crash",
    "loop/power-loss",
    "inproc/process-crash",
    "inproc/power-loss",
    "process/process-crash",
    "process/power-loss",
)


async def measure_on_this_loop(
    arguments: argparse.Namespace, database: str, durability: str, in_process: bool = False
) -> Figures:
    """Measure an engine that serves on the Worker's own event loop (no engine thread);
    ``in_process``: the Worker and Client reach it through the in-process channel."""
    if in_process and not route_in_process_channels():
        raise SystemExit("the in-process channel does not support this dex SDK release")
    server = EngineServer(database, "127.0.0.1", 0, durability, in_process=in_process)
    address = await server.start()
    try:
        return await measure(arguments, address)
    finally:
        await server.stop()


def run_engine(arguments: argparse.Namespace, config: str) -> Figures:
    """Measure one engine configuration on a fresh temporary database."""
    placement, durability = config.split("/")
    with tempfile.TemporaryDirectory(prefix="dex-bench-db-") as db_directory:
        database = str(Path(db_directory) / "engine.sqlite3")
        if placement in ("loop", "inproc"):
            figures = asyncio.run(
                measure_on_this_loop(arguments, database, durability, placement == "inproc")
            )
        else:
            with engine_address(database, placement == "process", durability) as address:
                figures = asyncio.run(measure(arguments, address))
    figures.settings = {"engine": placement, "durability": durability}
    return figures


def run_dbos(arguments: argparse.Namespace) -> Figures | None:
    """The same trivial workloads on DBOS over SQLite, or None without ``dbos``."""
    try:
        from dbos import DBOS, DBOSConfig
    except ImportError:
        print("dbos is not installed (uv run --group bench ...): no DBOS figures", flush=True)
        return None
    starts: defaultdict[str, list[float]] = defaultdict(list)

    @DBOS.step()
    def hop(key: str, value: int) -> int:
        starts[key].append(time.perf_counter())
        return value + 1

    @DBOS.workflow()
    def chain(key: str, steps: int) -> int:
        value = 0
        for _ in range(steps):
            value = hop(key, value)
        return value

    with tempfile.TemporaryDirectory(prefix="dex-bench-dbos-") as directory:
        config: DBOSConfig = {
            "name": "dex-bench",
            "system_database_url": f"sqlite:///{directory}/dbos.sqlite3",
            "log_level": "WARNING",
        }
        DBOS(config=config)
        DBOS.launch()
        try:
            chain("warmup", 50)
            figures = Figures(settings={"engine": "DBOS over SQLite"})
            cpu_before = cpu_seconds()
            started = time.perf_counter()
            chain("sequential", arguments.steps)
            elapsed = time.perf_counter() - started
            figures.sequential = {
                "steps": arguments.steps,
                "seconds": round(elapsed, 3),
                "steps_per_second": round(arguments.steps / elapsed, 1),
                "cpu_per_step_ms": cpu_per_unit_ms(cpu_before, arguments.steps),
                **gap_stats_ms(starts["sequential"]),
            }
            print(f"DBOS (a) sequential: {figures.sequential}", flush=True)
            keys = [f"fanout-{index}" for index in range(arguments.flows)]
            cpu_before = cpu_seconds()
            started = time.perf_counter()
            handles = [DBOS.start_workflow(chain, key, arguments.flow_steps) for key in keys]
            for handle in handles:
                handle.get_result()
            elapsed = time.perf_counter() - started
            total = arguments.flows * arguments.flow_steps
            p50s = [gap_stats_ms(starts[key])["step_latency_p50_ms"] for key in keys]
            figures.concurrent = {
                "flows": arguments.flows,
                "steps_per_flow": arguments.flow_steps,
                "steps": total,
                "seconds": round(elapsed, 3),
                "steps_per_second": round(total / elapsed, 1),
                "cpu_per_step_ms": cpu_per_unit_ms(cpu_before, total),
                "median_of_flow_step_latency_p50_ms": round(statistics.median(p50s), 3),
            }
            print(f"DBOS (b) concurrent: {figures.concurrent}", flush=True)
            return figures
        finally:
            DBOS.destroy()


def ratio(engine: float | None, dbos: float | None) -> str:
    """engine / DBOS as ``1.23x``, or ``-``."""
    if not engine or not dbos:
        return "-"
    return f"{engine / dbos:.2f}x"


def summary_table(rounds: list[dict[str, Any]]) -> str:
    """One Markdown row per configuration and round, with ratios to DBOS."""
    lines = [
        "| Round | Configuration | (a) Steps/s | vs DBOS | (a) p50 / p99 ms | (a) CPU/Step ms "
        "| (b) Steps/s | vs DBOS | (b) CPU/Step ms | (c) invoke_rpc p50 / p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, entry in enumerate(rounds, 1):
        dbos = entry.get("dbos") or {}
        dbos_a = (dbos.get("sequential") or {}).get("steps_per_second")
        dbos_b = (dbos.get("concurrent") or {}).get("steps_per_second")
        if dbos:
            seq = dbos["sequential"]
            lines.append(
                f"| {number} | DBOS over SQLite | {dbos_a} | 1.00x "
                f"| {seq.get('step_latency_p50_ms')} / {seq.get('step_latency_p99_ms')} "
                f"| {seq.get('cpu_per_step_ms', '-')} "
                f"| {dbos_b} | 1.00x | {dbos['concurrent'].get('cpu_per_step_ms', '-')} | - |"
            )
        for config, figures in entry["engine"].items():
            seq, con, rpc_ = figures["sequential"], figures["concurrent"], figures["rpc"]
            lines.append(
                f"| {number} | {config} | {seq['steps_per_second']} "
                f"| {ratio(seq['steps_per_second'], dbos_a)} "
                f"| {seq['step_latency_p50_ms']} / {seq['step_latency_p99_ms']} "
                f"| {seq.get('cpu_per_step_ms', '-')} "
                f"| {con['steps_per_second']} | {ratio(con['steps_per_second'], dbos_b)} "
                f"| {con.get('cpu_per_step_ms', '-')} "
                f"| {rpc_['rpc_p50_ms']} / {rpc_['rpc_p99_ms']} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every configuration")
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help="comma-separated placement/durability"
    )
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS comparison")
    parser.add_argument("--steps", type=int, default=1000, help="Steps in the sequential Flow")
    parser.add_argument("--flows", type=int, default=200, help="concurrent Flows")
    parser.add_argument("--flow-steps", type=int, default=20, help="Steps per concurrent Flow")
    parser.add_argument("--rpc-calls", type=int, default=500, help="sequential RPC calls")
    parser.add_argument("--worker-tasks", type=int, default=32, help="Worker max_concurrent_tasks")
    parser.add_argument("--idle-streams", type=int, default=4, help="idle pull streams per queue")
    parser.add_argument(
        "--memoize-sdk-version",
        action="store_true",
        help="apply dex_local_engine.sdk_patches.memoize_sdk_version (opt-in SDK fix)",
    )
    arguments = parser.parse_args(argv)
    configs = [config.strip() for config in arguments.configs.split(",") if config.strip()]
    for config in configs:
        if config not in CONFIGS:
            parser.error(f"unknown configuration {config!r}; use {', '.join(CONFIGS)}")
    if arguments.memoize_sdk_version and not memoize_sdk_version():
        parser.error("the SDK version memoization does not apply to this SDK")
    load_before = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    for _ in range(arguments.rounds):
        entry: dict[str, Any] = {"dbos": None, "engine": {}}
        if not arguments.no_dbos:
            dbos = run_dbos(arguments)
            entry["dbos"] = asdict(dbos) if dbos is not None else None
        for config in configs:
            print(f"-- {config}", flush=True)
            entry["engine"][config] = asdict(run_engine(arguments, config))
        rounds.append(entry)
    report = {
        "machine": machine_description(),
        "load_average_before_after": [list(load_before), list(os.getloadavg())],
        "settings": {
            "worker": "AsyncWorker (pull), synchronous handlers",
            "worker_max_concurrent_tasks": arguments.worker_tasks,
            "idle_streams_per_queue": arguments.idle_streams,
            "sdk_version_memoized": arguments.memoize_sdk_version,
        },
        "rounds": rounds,
    }
    print(json.dumps(report, indent=2))
    print(summary_table(rounds))
    print(f"load average before/after: {load_before} / {os.getloadavg()}")
    if arguments.json_path:
        Path(arguments.json_path).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
