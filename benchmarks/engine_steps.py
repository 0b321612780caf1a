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

Usage::

    uv run python benchmarks/engine_steps.py [--json PATH] [--db PATH|:memory:] [--engine-process]

By default the engine is embedded (a thread of this process, sharing the GIL
with the Worker and the Client); ``--engine-process`` runs it as a separate
``dex-local-engine serve`` process instead.

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
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
from typing import Any, cast

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

from dex_local_engine import LocalEngine

# flow_id -> perf_counter() at the start of every Step execution, in order.
STEP_STARTS: defaultdict[str, list[float]] = defaultdict(list)


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
        **gap_stats_ms(starts),
    }


async def run_concurrent(
    client: AsyncClient, flow: ChainFlow, flows: int, steps: int
) -> dict[str, float]:
    flow_ids = [f"bench-fanout-{index}-{uuid.uuid4()}" for index in range(flows)]
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
        "median_of_flow_step_latency_p50_ms": round(statistics.median(p50s), 3),
    }


async def run_rpc(client: AsyncClient, flow: EchoFlow, calls: int) -> dict[str, float]:
    flow_id = f"bench-rpc-{uuid.uuid4()}"
    await client.start_flow(flow, flow_id, 0)
    for warmup in range(20):
        await client.invoke_rpc(flow.echo, flow_id, warmup)
    samples: list[float] = []
    for index in range(calls):
        before = time.perf_counter()
        output = await client.invoke_rpc(flow.echo, flow_id, index)
        samples.append((time.perf_counter() - before) * 1000)
        if output != index:
            raise RuntimeError(f"echo returned {output!r} for {index}")
    await client.stop_flow(flow_id)
    return {
        "calls": calls,
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
def engine_address(database: str, separate_process: bool) -> Generator[str]:
    """Yield the address of a running engine: embedded, or a child process."""
    if not separate_process:
        with LocalEngine(database=database, host="127.0.0.1", port=0) as engine:
            yield str(engine.address)
        return
    command = [sys.executable, "-m", "dex_local_engine", "serve"]
    command += ["--host", "127.0.0.1", "--port", "0", "--db", database]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = READY_LINE.search(line)
        if match is None:
            raise RuntimeError(f"engine did not start: {line!r}")
        yield match.group(1)
    finally:
        child.terminate()
        child.wait(timeout=30)


def cache_sdk_version() -> None:
    """Experiment: memoize the SDK's version lookup.

    dex-python-sdk 1.23.0 reads its own package metadata (``importlib.metadata``,
    an e-mail-header parse) every time a pull stream registers, and a pull Worker
    opens a fresh stream for about every task it runs.
    """
    import dex._pull_worker as pull_worker
    import dex._server_protocol as server_protocol

    cached = functools.cache(server_protocol.sdk_version)
    server_protocol.sdk_version = cached
    cast(Any, pull_worker).sdk_version = cached


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    parser.add_argument(
        "--db", default=None, help="SQLite path or :memory: (default: a temporary file)"
    )
    parser.add_argument("--steps", type=int, default=1000, help="Steps in the sequential Flow")
    parser.add_argument("--flows", type=int, default=200, help="concurrent Flows")
    parser.add_argument("--flow-steps", type=int, default=20, help="Steps per concurrent Flow")
    parser.add_argument("--rpc-calls", type=int, default=500, help="sequential RPC calls")
    parser.add_argument("--worker-tasks", type=int, default=32, help="Worker max_concurrent_tasks")
    parser.add_argument("--idle-streams", type=int, default=4, help="idle pull streams per queue")
    parser.add_argument(
        "--engine-process", action="store_true", help="run the engine as a child process"
    )
    parser.add_argument(
        "--cache-sdk-version",
        action="store_true",
        help="experiment: memoize the SDK's per-stream package-metadata version lookup",
    )
    arguments = parser.parse_args(argv)
    if arguments.cache_sdk_version:
        cache_sdk_version()

    with tempfile.TemporaryDirectory(prefix="dex-bench-db-") as db_directory:
        database = arguments.db or str(Path(db_directory) / "engine.sqlite3")
        with engine_address(database, arguments.engine_process) as address:
            figures = asyncio.run(measure(arguments, address))
    figures.machine = machine_description()
    figures.settings = {
        "engine": "child process" if arguments.engine_process else "embedded (same process)",
        "database": "temporary file" if arguments.db is None else arguments.db,
        "worker": "AsyncWorker (pull), synchronous handlers",
        "worker_max_concurrent_tasks": arguments.worker_tasks,
        "idle_streams_per_queue": arguments.idle_streams,
        "sdk_version_cached": arguments.cache_sdk_version,
    }
    print(json.dumps(asdict(figures), indent=2))
    if arguments.json_path:
        Path(arguments.json_path).write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
