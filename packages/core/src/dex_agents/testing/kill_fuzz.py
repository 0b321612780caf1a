"""Kill-anywhere fuzzing: sessions under load while Workers and the engine die at random.

``run_kill_fuzz`` starts a private engine, Worker children and several concurrent
sessions of a scenario (a read, an idempotent write and an approved
non-idempotent write per turn), then SIGKILLs a Worker or the engine at seeded
random moments and restarts it, while each session is driven turn after turn.
Afterwards it checks the invariants from the tools' own invocation log and the
sessions' state:

* a non-idempotent write never ran twice (one run per idempotency key);
* every run of a write carries the key of a real call (``<session>/<turn>/<call>``),
  so a repeated idempotent write repeats its key;
* every user message a session accepted is stored, in order;
* every session ends consistent: waiting for a user message with no active turn,
  every tool call record final;
* no session is stuck: each completes its turns once the kills stop.

``python -m dex_agents.testing.kill_fuzz --seed 7 --seconds 1800`` runs it for a
while (``nox -s fuzz`` does this); the default test suite runs a short seeded run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents.session import AgentSessionFlow
from dex_agents.stepwise.conformance import STEPWISE_FLOW_FACTORY
from dex_agents.testing.engine import PrivateDexEngine
from dex_agents.testing.environment import AgentTestEnvironment
from dex_agents.testing.gates import InvocationLog
from dex_agents.testing.scenario_flow import STATE_DIRECTORY_VARIABLE, build_scenario_flow
from dex_agents.testing.scripts import (
    TOOL_RUNS_LOG,
    ModelScript,
    ModelTurn,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ToolCallSpec,
)
from dex_agents.testing.session_client import AgentSessionTestClient
from dex_agents.testing.worker_process import KillableWorkerProcess
from dex_agents.values import AgentSnapshot, AgentStatus, ResolveInterruptInput, ToolEffect

__all__ = ["FuzzReport", "main", "run_kill_fuzz"]

SCENARIO_WORKER_MODULE = "dex_agents.testing.scenario_worker"
FINAL_STATUSES = frozenset({"succeeded", "failed", "rejected", "outcome_unknown"})
TOOLS = (
    ScenarioTool("lookup_order", ToolEffect.READ, text="order {order_id} shipped"),
    ScenarioTool("reserve_stock", ToolEffect.IDEMPOTENT_WRITE, text="reserved {sku}"),
    ScenarioTool("charge_card", ToolEffect.NON_IDEMPOTENT_WRITE, text="charged {amount}"),
)
TURN = (
    ModelTurn(
        tool_calls=[
            ToolCallSpec("lookup_order", {"order_id": "42"}),
            ToolCallSpec("reserve_stock", {"sku": "s-1"}),
            ToolCallSpec("charge_card", {"amount": 5}),
        ]
    ),
    ModelTurn(text_from_tool_results=True),
)


@dataclass
class FuzzReport:
    """What a run did and every invariant it found broken."""

    seed: int
    sessions: int
    worker_kills: int = 0
    engine_kills: int = 0
    turns_completed: int = 0
    tool_runs: int = 0
    violations: list[str] = field(default_factory=list[str])

    @property
    def kills(self) -> int:
        return self.worker_kills + self.engine_kills

    def summary(self) -> str:
        return (
            f"seed {self.seed}: {self.kills} kills survived ({self.worker_kills} Worker, "
            f"{self.engine_kills} engine), {self.turns_completed} turns completed in "
            f"{self.sessions} sessions, {self.tool_runs} tool runs, "
            f"{len(self.violations)} invariant violations"
        )


class _Run:
    def __init__(self, *, seed: int, sessions: int, turns: int, state: Path, factory: str) -> None:
        self.rng = random.Random(seed)
        self.report = FuzzReport(seed=seed, sessions=sessions)
        self.turns = turns
        self.state = state
        self.factory = factory
        self.session_ids = [f"fuzz-{seed}-{n}" for n in range(sessions)]
        self.sent: dict[str, list[str]] = {sid: [] for sid in self.session_ids}
        self.workers: list[KillableWorkerProcess] = []
        self.kills_done = asyncio.Event()

    async def execute(self, kills: int, settle: timedelta) -> FuzzReport:
        script = ModelScript([response for _ in range(self.turns) for response in TURN])
        Scenario(script=script, tools=TOOLS, session=ScenarioSession("KillFuzz")).write(self.state)
        flow = build_scenario_flow(self.factory, self.state)
        assert isinstance(flow, AgentSessionFlow)
        with PrivateDexEngine.start() as engine:
            environment = await AgentTestEnvironment.start(
                server_address=engine.server_address, flows=[flow]
            )
            try:
                self.workers = [self._start_worker(environment) for _ in range(2)]
                sessions = AgentSessionTestClient(environment.client, flow)
                drivers = [
                    asyncio.ensure_future(self._drive(sessions, sid, settle))
                    for sid in self.session_ids
                ]
                await self._kill(engine, environment, kills)
                self.kills_done.set()
                snapshots = await asyncio.gather(*drivers)
                self._check(dict(zip(self.session_ids, snapshots, strict=True)))
            finally:
                await environment.close()
        return self.report

    def _start_worker(self, environment: AgentTestEnvironment) -> KillableWorkerProcess:
        return environment.start_worker_process(
            log_path=self.state / f"worker-{len(self.workers)}-{time.monotonic_ns()}.log",
            entry_module=SCENARIO_WORKER_MODULE,
            arguments=[self.factory],
            environment={STATE_DIRECTORY_VARIABLE: str(self.state)},
        )

    async def _kill(
        self, engine: PrivateDexEngine, environment: AgentTestEnvironment, kills: int
    ) -> None:
        for number in range(kills):
            await asyncio.sleep(self.rng.uniform(0.2, 1.5))
            # About one kill in four takes the engine down, at least one per short run.
            if number % 4 == 2 or self.rng.random() < 0.05:
                engine.kill()
                self.report.engine_kills += 1
                await asyncio.sleep(self.rng.uniform(0.0, 0.5))
                await asyncio.to_thread(engine.restart)
            else:
                victim = self.workers.pop(self.rng.randrange(len(self.workers)))
                victim.kill()
                self.report.worker_kills += 1
                self.workers.append(await asyncio.to_thread(self._start_worker, environment))

    async def _drive(
        self, sessions: AgentSessionTestClient, session_id: str, settle: timedelta
    ) -> AgentSnapshot | None:
        """Send each turn's message, approve each charge, until every turn is done."""
        started = False
        settled_by: float | None = None
        while True:
            if self.kills_done.is_set() and settled_by is None:
                settled_by = time.monotonic() + settle.total_seconds()
            if settled_by is not None and time.monotonic() > settled_by:
                self.report.violations.append(f"{session_id}: stuck, its turns never finished")
                return await _quietly(sessions.snapshot(session_id))
            try:
                if not started:
                    await sessions.start_session(session_id, "turn 1")
                    self.sent[session_id].append("turn 1")
                    started = True
                    continue
                snapshot = await asyncio.wait_for(sessions.snapshot(session_id), 10)
                for interrupt in snapshot.pending_interrupts:
                    await sessions.client.invoke_rpc(
                        sessions.flow.resolve_interrupt,
                        session_id,
                        ResolveInterruptInput(interrupt_id=interrupt.interrupt_id, approved=True),
                    )
                state = snapshot.state
                idle = state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
                if idle and state is not None and state.active_turn_id is None:
                    if state.turn_count >= self.turns:
                        return snapshot
                    if state.turn_count == len(self.sent[session_id]):
                        text = f"turn {state.turn_count + 1}"
                        if await sessions.send_user_message(session_id, text):
                            self.sent[session_id].append(text)
            except Exception:  # the engine or a Worker is down: try again shortly
                pass
            await asyncio.sleep(0.1)

    def _check(self, snapshots: dict[str, AgentSnapshot | None]) -> None:
        runs = InvocationLog(self.state / TOOL_RUNS_LOG).invocations()
        self.report.tool_runs = len(runs)
        per_key = Counter(run.idempotency_key for run in runs if run.tool_name == "charge_card")
        for key, count in per_key.items():
            if count > 1:
                self.report.violations.append(f"charge_card ran {count} times for {key}")
        for run in runs:
            key = run.idempotency_key or ""
            if run.tool_name != "lookup_order" and key.split("/", 1)[0] not in self.sent:
                self.report.violations.append(f"{run.tool_name} ran with a foreign key {key!r}")
        for session_id, snapshot in snapshots.items():
            if snapshot is None or snapshot.state is None:
                self.report.violations.append(f"{session_id}: no readable state at the end")
                continue
            self.report.turns_completed += snapshot.state.turn_count
            users = [m.text for m in snapshot.messages if m.role == "user"]
            if users != self.sent[session_id]:
                self.report.violations.append(
                    f"{session_id}: stored user messages {users} differ from accepted "
                    f"{self.sent[session_id]}"
                )
            if snapshot.state.active_turn_id is not None or snapshot.pending_interrupts:
                self.report.violations.append(f"{session_id}: ended inside a turn")
            for record in snapshot.tool_calls:
                if record.status.value not in FINAL_STATUSES:
                    self.report.violations.append(
                        f"{session_id}: tool call {record.tool_call_id} left {record.status.value}"
                    )


async def _quietly(call: Any) -> Any:
    try:
        return await asyncio.wait_for(call, 10)
    except Exception:
        return None


async def run_kill_fuzz(
    *,
    seed: int,
    kills: int,
    sessions: int = 3,
    turns: int = 3,
    factory: str = STEPWISE_FLOW_FACTORY,
    settle: timedelta = timedelta(seconds=120),
    state_directory: Path | None = None,
) -> FuzzReport:
    """One seeded run; the same seed makes the same kill schedule."""
    state = state_directory or Path(tempfile.mkdtemp(prefix="dex-agents-fuzz-"))
    run = _Run(seed=seed, sessions=sessions, turns=turns, state=state, factory=factory)
    return await run.execute(kills, settle)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dex_agents.testing.kill_fuzz")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0, help="keep running rounds this long")
    parser.add_argument("--kills", type=int, default=20, help="kills per round")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--factory", default=STEPWISE_FLOW_FACTORY)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.seconds
    seed = args.seed
    total = FuzzReport(seed=args.seed, sessions=0)
    while True:
        report = asyncio.run(
            run_kill_fuzz(
                seed=seed,
                kills=args.kills,
                sessions=args.sessions,
                turns=args.turns,
                factory=args.factory,
            )
        )
        print(report.summary(), flush=True)
        for violation in report.violations:
            print(f"  violation: {violation}", flush=True)
        total.sessions += report.sessions
        total.worker_kills += report.worker_kills
        total.engine_kills += report.engine_kills
        total.turns_completed += report.turns_completed
        total.tool_runs += report.tool_runs
        total.violations += report.violations
        seed += 1
        if time.monotonic() >= deadline:
            break
    print(f"total from {total.summary()}", flush=True)
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
