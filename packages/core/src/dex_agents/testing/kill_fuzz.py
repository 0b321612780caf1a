"""Kill-anywhere fuzzing: sessions of every runner under load while Workers and the engine die.

``run_kill_fuzz`` starts a private engine, Worker children that host one session
Flow per runner (Stepwise and each adapter, every one over its scripted model),
and concurrent sessions of each, all in the same run. Each turn the model calls a
read, an idempotent write and an approved non-idempotent write. Meanwhile a
driver SIGKILLs a Worker or the engine at seeded random moments and restarts it,
without waiting for the replacement Worker before the next kill. Afterwards it
checks the invariants from the tools' own invocation logs and the sessions'
stored state:

* a non-idempotent write never ran twice (one run per idempotency key);
* every run of a write carries the key of a real session's call
  (``<session>/<turn>/<call>``), so a repeated idempotent write repeats its key;
* every user message a session accepted is stored once, in order, and nothing else
  is (a message whose ``send_user_message`` died with the engine may or may not be);
* every tool call message is paired with its result in the same turn, and each
  turn that ran to its end stored its three calls;
* every session ends consistent: waiting for a user message, no active turn, no
  pending interrupt, nothing queued, every tool call record final;
* no session is stuck: each settles once the kills stop, and then completes one more
  turn.

A turn may fail when kills take every attempt of its model call (the session then
records the failure and goes on); the report counts such turns.

``python -m dex_agents.testing.kill_fuzz --seed 7 --seconds 1800`` runs rounds for
that long (``nox -s fuzz`` does this); the default test suite runs a short seeded
run. ``--runners stepwise,langgraph`` picks runners; every installed one by default.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dex_agents.testing._engine import PrivateDexEngine
from dex_agents.testing._environment import AgentTestEnvironment
from dex_agents.testing._fuzz_sessions import (
    FORK_SERVER_COMMAND,
    RUNNER_FACTORIES,
    FuzzRunner,
    FuzzSessions,
    add_runners_argument,
    available_runners,
    chosen_runners,
    serve_worker_forks,
)
from dex_agents.testing._worker_fork_server import ForkedWorker, WorkerForkServer

__all__ = ["RUNNER_FACTORIES", "FuzzReport", "available_runners", "main", "run_kill_fuzz"]


@dataclass
class FuzzReport:
    """What a run did and every invariant it found broken."""

    seed: int
    sessions: int
    runners: tuple[str, ...] = ()
    worker_kills: int = 0
    engine_kills: int = 0
    turns_completed: int = 0
    turns_failed: int = 0
    tool_runs: int = 0
    turns_by_runner: Counter[str] = field(default_factory=Counter[str])
    violations: list[str] = field(default_factory=list[str])

    @property
    def kills(self) -> int:
        return self.worker_kills + self.engine_kills

    def summary(self) -> str:
        by_runner = ", ".join(f"{name} {self.turns_by_runner[name]}" for name in self.runners)
        return (
            f"seed {self.seed}: {self.kills} kills survived ({self.worker_kills} Worker, "
            f"{self.engine_kills} engine), {self.turns_completed} turns completed in "
            f"{self.sessions} sessions ({by_runner}), {self.turns_failed} turns failed, "
            f"{self.tool_runs} tool runs, "
            f"{len(self.violations)} invariant violations"
        )

    def add(self, other: FuzzReport) -> None:
        self.sessions += other.sessions
        self.worker_kills += other.worker_kills
        self.engine_kills += other.engine_kills
        self.turns_completed += other.turns_completed
        self.turns_failed += other.turns_failed
        self.tool_runs += other.tool_runs
        self.turns_by_runner.update(other.turns_by_runner)
        self.violations += other.violations


class _Run:
    def __init__(
        self,
        *,
        seed: int,
        sessions: int,
        runners: Sequence[str],
        state: Path,
        workers: int,
        interval: tuple[float, float],
    ) -> None:
        self.rng = random.Random(seed)
        self.report = FuzzReport(
            seed=seed, sessions=sessions * len(runners), runners=tuple(runners)
        )
        self.state = state
        self.worker_count = workers
        self.interval = interval
        self.runners = [FuzzRunner.prepare(name, state, "KillFuzz") for name in runners]
        self.sessions = FuzzSessions(
            self.runners,
            {
                runner.name: [f"fuzz-{seed}-{runner.name}-{n}" for n in range(sessions)]
                for runner in self.runners
            },
        )
        self.workers: list[ForkedWorker] = []
        self.fork_server: WorkerForkServer | None = None
        self.spawning: set[asyncio.Future[None]] = set()
        self.worker_forked = asyncio.Event()

    async def execute(self, kills: int, settle: timedelta, until: float | None) -> FuzzReport:
        with PrivateDexEngine.start() as engine:
            environment = await AgentTestEnvironment.start(
                server_address=engine.server_address, flows=[r.flow for r in self.runners]
            )
            try:
                self.fork_server = await asyncio.to_thread(
                    WorkerForkServer.start,
                    [
                        sys.executable,
                        "-m",
                        "dex_agents.testing.kill_fuzz",
                        FORK_SERVER_COMMAND,
                        *(runner.worker_argument for runner in self.runners),
                    ],
                    server_address=engine.server_address,
                    log_path=self.state / "fork-server.log",
                )
                for _ in range(self.worker_count):
                    self._replace()
                drivers = self.sessions.drivers(environment.client)
                await self._kill(engine, kills, until)
                self.sessions.faults_done.set()
                try:
                    await asyncio.wait_for(asyncio.gather(*drivers), settle.total_seconds())
                except TimeoutError:
                    self.report.violations.append("a session is stuck: it never settled")
                await self.sessions.check(environment.client, self.report)
            finally:
                for task in self.spawning:
                    task.cancel()
                if self.fork_server is not None:
                    self.fork_server.close()
                await environment.close()
        return self.report

    async def _spawn_worker(self) -> None:
        """Fork a Worker into the pool at once; a kill may hit it while it still starts.

        One that exits before it is ready without being killed (it started while the
        engine was down) is replaced."""
        assert self.fork_server is not None
        worker = await asyncio.to_thread(
            self.fork_server.spawn, self.state / f"worker-{time.monotonic_ns()}.log"
        )
        self.workers.append(worker)
        self.worker_forked.set()
        try:
            await asyncio.to_thread(worker.wait_until_ready, timedelta(seconds=120))
        except (RuntimeError, TimeoutError):
            if worker in self.workers:
                self.workers.remove(worker)
                self._replace()

    def _replace(self) -> None:
        if self.sessions.faults_done.is_set() and len(self.workers) >= self.worker_count:
            return
        task = asyncio.ensure_future(self._spawn_worker())
        self.spawning.add(task)
        task.add_done_callback(self.spawning.discard)

    async def _kill(self, engine: PrivateDexEngine, kills: int, until: float | None) -> None:
        for number in range(kills):
            await asyncio.sleep(self.rng.uniform(*self.interval))
            if until is not None and time.monotonic() >= until:
                return
            # About one kill in four takes the engine down, at least one per short run.
            if number % 4 == 2 or self.rng.random() < 0.05:
                engine.kill()
                self.report.engine_kills += 1
                await asyncio.sleep(self.rng.uniform(0.0, 0.3))
                await asyncio.to_thread(engine.restart)
                continue
            while not self.workers:  # every replacement is still being forked
                self.worker_forked.clear()
                await self.worker_forked.wait()
            # Any Worker, ready or still registering, so no kill waits for a start.
            victim = self.workers.pop(self.rng.randrange(len(self.workers)))
            victim.kill()
            self.report.worker_kills += 1
            self._replace()


async def run_kill_fuzz(
    *,
    seed: int,
    kills: int,
    sessions: int = 2,
    runners: Sequence[str] | None = None,
    workers: int = 5,
    interval: tuple[float, float] = (0.2, 1.5),
    settle: timedelta = timedelta(seconds=300),
    state_directory: Path | None = None,
    until: float | None = None,
) -> FuzzReport:
    """One seeded run: ``sessions`` sessions per runner (every installed runner by
    default) on ``workers`` Worker children, ``kills`` kills ``interval`` seconds
    apart (no kill after the ``time.monotonic()`` value ``until``); the same seed makes
    the same kill schedule."""
    state = state_directory or Path(tempfile.mkdtemp(prefix="dex-agents-fuzz-"))
    run = _Run(
        seed=seed,
        sessions=sessions,
        runners=list(runners or available_runners()),
        state=state,
        workers=workers,
        interval=interval,
    )
    report = await run.execute(kills, settle, until)
    if state_directory is None and not report.violations:
        shutil.rmtree(state, ignore_errors=True)  # kept only to look into a violation
    return report


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [FORK_SERVER_COMMAND]:
        return serve_worker_forks(arguments[1:])
    parser = argparse.ArgumentParser(prog="python -m dex_agents.testing.kill_fuzz")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0, help="keep running rounds this long")
    parser.add_argument("--kills", type=int, default=200, help="kills per round")
    parser.add_argument("--sessions", type=int, default=2, help="sessions per runner")
    parser.add_argument("--workers", type=int, default=5, help="Worker children at once")
    add_runners_argument(parser)
    args = parser.parse_args(arguments)
    runners = chosen_runners(parser, args)
    started = time.monotonic()
    seed = args.seed
    total = FuzzReport(seed=args.seed, sessions=0, runners=tuple(runners))
    while True:
        try:
            report = asyncio.run(
                run_kill_fuzz(
                    seed=seed,
                    kills=args.kills,
                    sessions=args.sessions,
                    runners=runners,
                    workers=args.workers,
                    until=started + args.seconds,
                )
            )
        except Exception as error:  # the harness itself failed: count it, go on
            report = FuzzReport(seed=seed, sessions=0, runners=tuple(runners))
            report.violations.append(f"the round failed: {error!r}")
        print(report.summary(), flush=True)
        for violation in report.violations:
            print(f"  violation: {violation}", flush=True)
        total.add(report)
        seed += 1
        if time.monotonic() - started >= args.seconds:
            break
    minutes = (time.monotonic() - started) / 60
    print(f"total from {total.summary()}; {minutes:.1f} minutes", flush=True)
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
