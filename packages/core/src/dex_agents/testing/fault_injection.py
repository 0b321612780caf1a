"""Faults between processes: a token-secured engine, two Workers and a client, with a
TCP proxy between them that breaks their links, while sessions of every runner run.

``run_fault_injection`` starts ``dex-local-engine serve`` with a bearer token on a
temporary database, two Worker-only ``AgentHost`` processes (forked from a warm
process, each reaching the engine through its own proxy link) and, in this
process, a client-only ``AgentHost`` on a third link that drives the sessions:
sessions of Stepwise and every adapter, spread over the runners, each turn
calling a read, an idempotent write and an approved non-idempotent write. A
seeded schedule then injects, ``interval`` seconds apart:

* ``connection_reset``: every connection of one link ends with a TCP RST;
* ``black_hole_healed`` / ``black_hole_reset``: one link forwards nothing for 1-5 s,
  then delivers what waited, or resets what it held;
* ``slow_link``: one link delays every chunk by 20-300 ms (sometimes throttled too)
  for 2-6 s;
* ``engine_sigkill``: SIGKILL of the engine, restarted on the same database and port
  after up to 1 s;
* ``worker_sigkill``: SIGKILL of one Worker, a replacement forked at once;
* ``worker_sigterm``: SIGTERM of one Worker, which drains; replaced once it exited;
* ``worker_partition``: one Worker's link black-holed for ``partition_seconds``
  (longer than the engine takes to find a silent peer), then healed.

The first faults cover every kind once (in seeded order), so a short run tests
them all. The last fault is always a partition of one Worker that lasts until the
run ends: every session must then settle on the other Worker. When the faults
stop, each session gets one last message, and the run checks the kill fuzzer's
invariants (see ``kill_fuzz``) from the tools' own invocation logs and the
sessions' stored state: no non-idempotent write twice, every accepted message
stored once in order, every call paired with its result, every session settled
and none stuck.

``python -m dex_agents.testing.fault_injection --seed 7 --faults 300 --sessions 20``
runs one long run (``nox -s faults`` does this) and prints a summary line and the
report as JSON (``--json PATH`` also writes it to a file); the default test suite
runs a short seeded run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents._host import AgentHost
from dex_agents._host_auth import TOKEN_VARIABLE
from dex_agents.testing._engine import PrivateDexEngine
from dex_agents.testing._fault_proxy import FaultProxy
from dex_agents.testing._fuzz_sessions import (
    FORK_SERVER_COMMAND,
    FuzzRunner,
    FuzzSessions,
    add_runners_argument,
    available_runners,
    chosen_runners,
    serve_worker_forks,
)
from dex_agents.testing._polling import PollTimeoutError, poll_until
from dex_agents.testing._worker_fork_server import ForkedWorker, WorkerForkServer
from dex_agents.testing._worker_process import WORKER_READY_LINE

__all__ = [
    "FAULT_KINDS",
    "TOKEN_VARIABLE",
    "FaultReport",
    "available_runners",
    "main",
    "run_fault_injection",
]

FAULT_KINDS = (
    "connection_reset",
    "black_hole_healed",
    "black_hole_reset",
    "slow_link",
    "engine_sigkill",
    "worker_sigkill",
    "worker_sigterm",
    "worker_partition",
)
"""Every fault the run injects, as the report counts them."""
_WEIGHTS = {
    "connection_reset": 3.0,
    "black_hole_healed": 1.0,
    "black_hole_reset": 1.0,
    "slow_link": 2.0,
    "engine_sigkill": 1.0,
    "worker_sigkill": 2.0,
    "worker_sigterm": 1.0,
    "worker_partition": 0.3,
}
WORKERS = 2
CLIENT_LINK = "client"
FOREVER_SECONDS = 24 * 3600.0
WORKER_READY_TIMEOUT = timedelta(seconds=300)
DRAIN_GRACE = timedelta(seconds=60)
"""How long a SIGTERMed Worker may drain before it is SIGKILLed."""


@dataclass
class FaultReport:
    """What a run injected, what its sessions did, and every invariant found broken."""

    seed: int
    sessions: int
    runners: tuple[str, ...] = ()
    token: bool = True
    faults: Counter[str] = field(default_factory=Counter[str])
    turns_completed: int = 0
    turns_failed: int = 0
    tool_runs: int = 0
    turns_by_runner: Counter[str] = field(default_factory=Counter[str])
    worker_exits: int = 0
    """Workers that exited without being signalled (replaced like a killed one)."""
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list[str])

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{self.faults[kind]} {kind}" for kind in FAULT_KINDS)
        by_runner = ", ".join(f"{name} {self.turns_by_runner[name]}" for name in self.runners)
        return (
            f"seed {self.seed}: {self.faults_injected} faults survived ({kinds}), "
            f"{self.turns_completed} turns completed in {self.sessions} sessions ({by_runner}), "
            f"{self.turns_failed} turns failed, {self.tool_runs} tool runs, "
            f"{self.worker_exits} unsignalled Worker exits, {self.seconds:.0f} s, "
            f"{len(self.violations)} invariant violations"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "sessions": self.sessions,
            "runners": list(self.runners),
            "token": self.token,
            "faults_injected": self.faults_injected,
            "faults": {kind: self.faults[kind] for kind in FAULT_KINDS},
            "turns_completed": self.turns_completed,
            "turns_by_runner": {name: self.turns_by_runner[name] for name in self.runners},
            "turns_failed": self.turns_failed,
            "tool_runs": self.tool_runs,
            "worker_exits": self.worker_exits,
            "seconds": round(self.seconds, 1),
            "violations": list(self.violations),
        }


class _Slot:
    """One of the run's Worker processes, on its own proxy link."""

    def __init__(self, link: str) -> None:
        self.link = link
        self.worker: ForkedWorker | None = None
        self.draining = False

    def ready(self) -> bool:
        """Whether the slot's Worker runs and registered."""
        worker = self.worker
        return (
            worker is not None
            and not self.draining
            and worker.is_running()
            and WORKER_READY_LINE in worker.read_log()
        )


class _Run:
    def __init__(
        self,
        *,
        seed: int,
        sessions: int,
        runners: Sequence[str],
        state: Path,
        interval: tuple[float, float],
        token: bool,
        partition_seconds: float,
    ) -> None:
        self.rng = random.Random(seed)
        self.state = state
        self.interval = interval
        self.partition_seconds = partition_seconds
        self.partitioned_until = 0.0
        """When the last healing partition ends (``time.monotonic()``)."""
        self.token = secrets.token_urlsafe(24) if token else None
        self.report = FaultReport(seed=seed, sessions=sessions, runners=tuple(runners), token=token)
        self.runners = [FuzzRunner.prepare(name, state, "FaultRun") for name in runners]
        ids: dict[str, list[str]] = {runner.name: [] for runner in self.runners}
        for number in range(sessions):  # round robin: every runner gets its share
            runner = self.runners[number % len(self.runners)]
            ids[runner.name].append(f"faults-{seed}-{runner.name}-{number}")
        self.sessions = FuzzSessions(self.runners, ids)
        self.slots = [_Slot(f"worker-{number}") for number in range(WORKERS)]
        self.fork_server: WorkerForkServer | None = None
        self.proxy: FaultProxy | None = None
        self.drains: set[asyncio.Future[None]] = set()

    async def execute(self, faults: int, settle: timedelta) -> FaultReport:
        started = time.monotonic()
        engine = await asyncio.to_thread(
            PrivateDexEngine.start, self.state / "engine", token=self.token
        )
        host: AgentHost | None = None
        supervisor: asyncio.Future[None] | None = None
        try:
            self.proxy = proxy = FaultProxy.start(
                engine.server_address, [slot.link for slot in self.slots] + [CLIENT_LINK]
            )
            environment = {TOKEN_VARIABLE: self.token} if self.token else {}
            self.fork_server = await asyncio.to_thread(
                WorkerForkServer.start,
                [
                    sys.executable,
                    "-m",
                    "dex_agents.testing.fault_injection",
                    FORK_SERVER_COMMAND,
                    *(runner.worker_argument for runner in self.runners),
                ],
                server_address=proxy.address(self.slots[0].link),
                log_path=self.state / "fork-server.log",
                environment=environment,
            )
            supervisor = asyncio.ensure_future(self._supervise())
            host = AgentHost(
                [runner.flow for runner in self.runners],
                server_address=proxy.address(CLIENT_LINK),
                worker=False,
                auth_token=self.token,
            )
            await host.start()
            drivers = self.sessions.drivers(host.dex_client)
            await self._inject(engine, faults - 1)
            await self._partition_to_the_end()
            self.sessions.faults_done.set()
            try:
                await asyncio.wait_for(asyncio.gather(*drivers), settle.total_seconds())
            except TimeoutError:
                stuck = [
                    sid
                    for sid, driver in zip(self.sessions.sent, drivers, strict=True)
                    if not driver.done()
                ]
                self.report.violations.append(f"sessions stuck, never settled: {stuck}")
                for driver in drivers:
                    driver.cancel()
            await self.sessions.check(host.dex_client, self.report)
        finally:
            if supervisor is not None:
                supervisor.cancel()
            for drain in self.drains:
                drain.cancel()
            if host is not None:
                with contextlib.suppress(Exception):
                    await host.stop()
            if self.fork_server is not None:
                self.fork_server.close()
            if self.proxy is not None:
                self.proxy.close()
            engine.close()
            self.report.seconds = time.monotonic() - started
        return self.report

    # --- Workers ------------------------------------------------------------------------

    async def _supervise(self) -> None:
        """Keep a Worker in every slot: fork one where none runs and none is draining."""
        while True:
            for slot in self.slots:
                if slot.draining:
                    continue
                if slot.worker is not None and slot.worker.is_running():
                    continue
                if slot.worker is not None:  # it exited without a signal from the run
                    self.report.worker_exits += 1
                await self._fork(slot)
            await asyncio.sleep(0.2)

    async def _fork(self, slot: _Slot) -> None:
        assert self.fork_server is not None
        assert self.proxy is not None
        log = self.state / f"{slot.link}-{time.monotonic_ns()}.log"
        slot.worker = await asyncio.to_thread(
            self.fork_server.spawn, log, self.proxy.address(slot.link)
        )

    async def _drain(self, slot: _Slot, worker: ForkedWorker) -> None:
        """Wait for a SIGTERMed Worker to exit (SIGKILL after the grace), then free the slot."""
        with contextlib.suppress(PollTimeoutError):
            await poll_until(
                lambda: not worker.is_running(),
                description=f"Worker {worker.pid} to drain and exit",
                within=DRAIN_GRACE,
            )
        worker.kill()
        slot.worker = None
        slot.draining = False

    # --- faults -------------------------------------------------------------------------

    def _schedule(self, faults: int) -> list[str]:
        """Every kind once in seeded order, then kinds drawn by weight."""
        first = list(FAULT_KINDS)
        self.rng.shuffle(first)
        kinds = list(_WEIGHTS)
        rest = self.rng.choices(kinds, [_WEIGHTS[k] for k in kinds], k=max(0, faults - len(first)))
        return (first + rest)[:faults]

    async def _inject(self, engine: PrivateDexEngine, faults: int) -> None:
        assert self.proxy is not None
        proxy = self.proxy
        links = [slot.link for slot in self.slots] + [CLIENT_LINK]
        for kind in self._schedule(faults):
            await asyncio.sleep(self.rng.uniform(*self.interval))
            link = self.rng.choice(links)
            if kind == "connection_reset":
                proxy.reset(link)
            elif kind in ("black_hole_healed", "black_hole_reset"):
                seconds = self.rng.uniform(1.0, 5.0)
                proxy.black_hole(link, seconds, heal=kind == "black_hole_healed")
            elif kind == "slow_link":
                throttle = self.rng.choice([0.0, self.rng.uniform(20_000, 200_000)])
                proxy.slow(
                    link,
                    self.rng.uniform(2.0, 6.0),
                    latency=self.rng.uniform(0.02, 0.3),
                    bytes_per_second=throttle,
                )
            elif kind == "worker_partition":
                link = self.rng.choice([slot.link for slot in self.slots])
                proxy.black_hole(link, self.partition_seconds, heal=True)
                self.partitioned_until = time.monotonic() + self.partition_seconds
            elif kind == "engine_sigkill":
                engine.kill()
                await asyncio.sleep(self.rng.uniform(0.0, 1.0))
                await asyncio.to_thread(engine.restart)
            else:
                await self._signal_worker(kind)
            self.report.faults[kind] += 1

    async def _signal_worker(self, kind: str) -> None:
        """SIGKILL or SIGTERM the Worker of a random slot (waiting for one if none runs)."""
        while True:
            candidates = [s for s in self.slots if not s.draining and s.worker is not None]
            if candidates:
                break
            await asyncio.sleep(0.1)
        slot = self.rng.choice(candidates)
        worker = slot.worker
        assert worker is not None
        if kind == "worker_sigkill":
            worker.kill()
            slot.worker = None  # the supervisor forks the replacement
        else:
            slot.draining = True
            worker.terminate()
            drain = asyncio.ensure_future(self._drain(slot, worker))
            self.drains.add(drain)
            drain.add_done_callback(self.drains.discard)

    async def _partition_to_the_end(self) -> None:
        """The last fault: once every drain and healing partition ended (so both Workers
        run), black-hole one Worker's link until the run ends."""
        await asyncio.gather(*self.drains)
        await asyncio.sleep(max(0.0, self.partitioned_until - time.monotonic()))
        await poll_until(
            lambda: all(slot.ready() for slot in self.slots),
            description="both Workers registered before the last partition",
            within=WORKER_READY_TIMEOUT,
        )
        assert self.proxy is not None
        self.proxy.black_hole(self.rng.choice(self.slots).link, FOREVER_SECONDS, heal=True)
        self.report.faults["worker_partition"] += 1


async def run_fault_injection(
    *,
    seed: int,
    faults: int,
    sessions: int = 20,
    runners: Sequence[str] | None = None,
    interval: tuple[float, float] = (0.3, 1.5),
    token: bool = True,
    partition_seconds: float = 40.0,
    settle: timedelta = timedelta(seconds=600),
    state_directory: Path | None = None,
) -> FaultReport:
    """One seeded run: ``sessions`` sessions spread over ``runners`` (every installed
    runner by default), ``faults`` faults ``interval`` seconds apart; the same seed
    makes the same fault schedule (``faults`` at least 1: the last is the partition that
    lasts to the end). ``token=False`` runs the engine without a token.
    The state directory (logs, tool-run logs) is kept when given or on a violation."""
    if faults < 1:
        raise ValueError("faults must be at least 1")
    state = state_directory or Path(tempfile.mkdtemp(prefix="dex-agents-faults-"))
    chosen = list(runners or available_runners())
    run = _Run(
        seed=seed,
        sessions=sessions,
        runners=chosen,
        state=state,
        interval=interval,
        token=token,
        partition_seconds=partition_seconds,
    )
    report = await run.execute(faults, settle)
    if state_directory is None and not report.violations:
        shutil.rmtree(state, ignore_errors=True)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """The command: one run, its summary line and its JSON report; exit 1 on a violation."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [FORK_SERVER_COMMAND]:
        return serve_worker_forks(arguments[1:])
    parser = argparse.ArgumentParser(prog="python -m dex_agents.testing.fault_injection")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=300, help="faults to inject")
    parser.add_argument("--sessions", type=int, default=20, help="sessions, over all runners")
    add_runners_argument(parser)
    parser.add_argument(
        "--partition-seconds", type=float, default=40.0, help="how long a healing partition lasts"
    )
    parser.add_argument("--no-token", action="store_true", help="run the engine without a token")
    parser.add_argument("--json", type=Path, help="also write the report as JSON to this file")
    parser.add_argument("--state-directory", type=Path, help="keep logs here")
    args = parser.parse_args(arguments)
    runners = chosen_runners(parser, args)
    try:
        report = asyncio.run(
            run_fault_injection(
                seed=args.seed,
                faults=args.faults,
                sessions=args.sessions,
                runners=runners,
                token=not args.no_token,
                partition_seconds=args.partition_seconds,
                state_directory=args.state_directory,
            )
        )
    except Exception as error:  # the harness itself failed
        report = FaultReport(
            seed=args.seed,
            sessions=args.sessions,
            runners=tuple(runners),
            token=not args.no_token,
        )
        report.violations.append(f"the run failed: {error!r}")
    print(report.summary(), flush=True)
    for violation in report.violations:
        print(f"  violation: {violation}", flush=True)
    text = json.dumps(report.to_json(), indent=2)
    print(text, flush=True)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
