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
import importlib.util
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
from typing import Any

import dex

from dex_agents._values import AgentMessage, AgentSnapshot, AgentStatus, ToolEffect
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.testing._engine import PrivateDexEngine
from dex_agents.testing._environment import AgentTestEnvironment
from dex_agents.testing._gates import InvocationLog
from dex_agents.testing._scenario_flow import build_scenario_flow
from dex_agents.testing._scripts import (
    TOOL_RUNS_LOG,
    ModelScript,
    ModelTurn,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ToolCallSpec,
)
from dex_agents.testing._session_client import AgentSessionTestClient
from dex_agents.testing._worker_fork_server import ForkedWorker, WorkerForkServer, serve_forks

__all__ = ["RUNNER_FACTORIES", "FuzzReport", "available_runners", "main", "run_kill_fuzz"]

RUNNER_FACTORIES: dict[str, str] = {
    # By name, like the adapters': the testing kit sits below the runners it fuzzes.
    "stepwise": "dex_agents.stepwise.conformance:build_stepwise_flow",
    "openai-agents": "dex_agents_openai_agents.conformance:build_conformance_flow",
    "langgraph": "dex_agents_langgraph.conformance:build_conformance_flow",
    "pydantic-ai": "dex_agents_pydantic_ai.conformance:build_conformance_flow",
    "claude": "dex_agents_claude_sdk.conformance:build_conformance_flow",
}
"""Each runner's scenario factory (see ``scenario_flow``): its own scripted model and tools."""

FORK_SERVER_COMMAND = "fork-server"
FINAL_STATUSES = frozenset({"succeeded", "failed", "rejected", "outcome_unknown"})
TOOLS = (
    ScenarioTool("lookup_order", ToolEffect.READ, text="order {order_id} shipped"),
    ScenarioTool("reserve_stock", ToolEffect.IDEMPOTENT_WRITE, text="reserved {sku}"),
    ScenarioTool("charge_card", ToolEffect.NON_IDEMPOTENT_WRITE, text="charged {amount}"),
)
CALLS = (
    ("lookup_order", {"order_id": "42"}),
    ("reserve_stock", {"sku": "s-1"}),
    ("charge_card", {"amount": 5}),
)
CALLS_PER_TURN = len(CALLS)


def _turn(number: int) -> tuple[ModelTurn, ModelTurn]:
    """Turn ``number``'s responses: the three calls, then an answer quoting their results.

    Call IDs are unique across the session, as a real model's are.
    """
    calls = [
        ToolCallSpec(name, arguments, tool_call_id=f"t{number}-{name}") for name, arguments in CALLS
    ]
    return ModelTurn(tool_calls=calls), ModelTurn(text_from_tool_results=True)


LOST_AFTER_SECONDS = 15.0
SESSION_NOTE_PREFIX = "[Dex] "
"""Notes the session stores as user messages (a failed turn's summary, for one)."""
SCRIPT_TURNS = 400
"""Turns the scripted model can play per session: more than any run completes."""


def available_runners() -> list[str]:
    """The runners whose package is installed (Stepwise always is)."""
    return [
        name
        for name, factory in RUNNER_FACTORIES.items()
        if importlib.util.find_spec(factory.split(":", 1)[0].split(".", 1)[0]) is not None
    ]


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


@dataclass
class _Sent:
    """The user messages a driver sent: ``confirmed`` ones were accepted for sure."""

    texts: list[str] = field(default_factory=list[str])
    confirmed: set[str] = field(default_factory=set[str])
    lost_after: float | None = None

    def caught_up(self, snapshot: AgentSnapshot) -> bool:
        """Whether the last message is stored, or was never accepted and is not coming.

        A settled session may not show a message it accepted yet (the turn that takes it
        has not committed), so only a message whose send failed counts as lost, and only
        after it stayed away for ``LOST_AFTER_SECONDS``.
        """
        last = self.texts[-1] if self.texts else None
        if last is None or any(
            message.role == "user" and message.text == last for message in snapshot.messages
        ):
            self.lost_after = None
            return True
        if last in self.confirmed:
            return False
        if self.lost_after is None:
            self.lost_after = time.monotonic() + LOST_AFTER_SECONDS
        if time.monotonic() < self.lost_after:
            return False
        self.lost_after = None
        return True


@dataclass(frozen=True)
class _Runner:
    name: str
    state: Path
    flow: AgentSessionFlow

    @property
    def worker_argument(self) -> str:
        return f"{RUNNER_FACTORIES[self.name]}={self.state}"


def _flow_type(runner: str) -> str:
    return "KillFuzz" + "".join(part.title() for part in runner.split("-"))


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
        self.runners = [self._prepare(name) for name in runners]
        self.session_ids = {
            runner.name: [f"fuzz-{seed}-{runner.name}-{n}" for n in range(sessions)]
            for runner in self.runners
        }
        self.sent = {sid: _Sent() for ids in self.session_ids.values() for sid in ids}
        self.last_messages: dict[str, str] = {}
        """The message each session got after the kills: its turn must complete."""
        self.workers: list[ForkedWorker] = []
        self.fork_server: WorkerForkServer | None = None
        self.spawning: set[asyncio.Future[None]] = set()
        self.worker_forked = asyncio.Event()
        self.kills_done = asyncio.Event()

    def _prepare(self, name: str) -> _Runner:
        state = self.state / name
        script = ModelScript([r for n in range(1, SCRIPT_TURNS + 1) for r in _turn(n)])
        Scenario(script=script, tools=TOOLS, session=ScenarioSession(_flow_type(name))).write(state)
        flow = build_scenario_flow(RUNNER_FACTORIES[name], state)
        assert isinstance(flow, AgentSessionFlow)
        return _Runner(name, state, flow)

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
                drivers = [
                    asyncio.ensure_future(
                        self._drive(AgentSessionTestClient(environment.client, runner.flow), sid)
                    )
                    for runner in self.runners
                    for sid in self.session_ids[runner.name]
                ]
                await self._kill(engine, kills, until)
                self.kills_done.set()
                try:
                    await asyncio.wait_for(asyncio.gather(*drivers), settle.total_seconds())
                except TimeoutError:
                    self.report.violations.append("a session is stuck: it never settled")
                await self._check(environment)
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
        if self.kills_done.is_set() and len(self.workers) >= self.worker_count:
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

    async def _drive(self, sessions: AgentSessionTestClient, session_id: str) -> None:
        """Send a message whenever the session is idle and approve each charge; once the
        kills are over, send one last message and return when its turn has settled."""
        sent = self.sent[session_id]
        started = False
        last: str | None = None
        while True:
            try:
                if not started:
                    await self._start(sessions, session_id)
                    started = True
                    continue
                snapshot = await asyncio.wait_for(sessions.snapshot(session_id), 10)
                for interrupt in snapshot.pending_interrupts:
                    await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, True)
                if _settled(snapshot) and sent.caught_up(snapshot):
                    if last is not None:
                        return
                    text = f"message {len(sent.texts) + 1}"
                    if self.kills_done.is_set():
                        last = self.last_messages[session_id] = text
                    sent.texts.append(text)
                    if await sessions.send_user_message(session_id, text):
                        sent.confirmed.add(text)
            except Exception:  # the engine or a Worker is down: try again shortly
                pass
            await asyncio.sleep(0.1)

    async def _start(self, sessions: AgentSessionTestClient, session_id: str) -> None:
        """Start the session; when the start died with the engine, find out if it happened."""
        sent = self.sent[session_id]
        if not sent.texts:
            sent.texts.append("message 1")
        try:
            await sessions.start_session(session_id, "message 1")
            sent.confirmed.add("message 1")
        except Exception:
            await asyncio.wait_for(sessions.snapshot(session_id), 10)  # raises unless it exists

    async def _check(self, environment: AgentTestEnvironment) -> None:
        for runner in self.runners:
            self._check_tool_runs(runner)
            sessions = AgentSessionTestClient(environment.client, runner.flow)
            for session_id in self.session_ids[runner.name]:
                try:
                    snapshot = await asyncio.wait_for(sessions.snapshot(session_id), 30)
                    messages = await asyncio.wait_for(_all_messages(sessions, session_id), 60)
                except Exception as error:
                    self.report.violations.append(f"{session_id}: unreadable at the end: {error}")
                    continue
                self._check_session(runner.name, session_id, snapshot, messages)

    def _check_tool_runs(self, runner: _Runner) -> None:
        runs = InvocationLog(runner.state / TOOL_RUNS_LOG).invocations()
        self.report.tool_runs += len(runs)
        per_key = Counter(run.idempotency_key for run in runs if run.tool_name == "charge_card")
        for key, count in per_key.items():
            if count > 1:
                self.report.violations.append(
                    f"{runner.name}: charge_card ran {count} times for {key}"
                )
        sessions = set(self.session_ids[runner.name])
        for run in runs:
            key = run.idempotency_key or ""
            if run.tool_name != "lookup_order" and key.split("/", 1)[0] not in sessions:
                self.report.violations.append(
                    f"{runner.name}: {run.tool_name} ran with a foreign key {key!r}"
                )

    def _check_session(
        self,
        runner: str,
        session_id: str,
        snapshot: AgentSnapshot,
        messages: Sequence[AgentMessage],
    ) -> None:
        violations = self.report.violations
        state = snapshot.state
        if state is None:
            violations.append(f"{session_id}: no state at the end")
            return
        if not _settled(snapshot) or snapshot.pending_interrupts:
            violations.append(f"{session_id}: ended unsettled ({state.status.value})")
        sent = self.sent[session_id]
        users = [
            m.text or ""
            for m in messages
            if m.role == "user" and not (m.text or "").startswith(SESSION_NOTE_PREFIX)
        ]
        unknown = [text for text in users if text not in sent.texts]
        missing = [text for text in sent.confirmed if text not in users]
        in_order = [text for text in sent.texts if text in users]
        if unknown or missing or users != in_order:
            violations.append(
                f"{session_id}: stored user messages {users} do not match sent {sent.texts}"
                f" (accepted {sorted(sent.confirmed)})"
            )
        calls = Counter(
            (m.turn_id, m.tool_call_id)
            for m in messages
            if m.role == "assistant" and m.tool_call_id
        )
        results = Counter((m.turn_id, m.tool_call_id) for m in messages if m.role == "tool")
        if calls != results:
            violations.append(f"{session_id}: tool calls and results differ: {calls} vs {results}")
        answered_turns = {
            m.turn_id for m in messages if m.role == "assistant" and not m.tool_call_id
        }
        self.report.turns_completed += len(answered_turns)
        self.report.turns_by_runner[runner] += len(answered_turns)
        self.report.turns_failed += len({m.turn_id for m in messages} - answered_turns)
        last = self.last_messages.get(session_id)
        if not any(m.text == last and m.turn_id in answered_turns for m in messages):
            violations.append(f"{session_id}: no turn completed after the kills")
        for turn_id in answered_turns:
            stored = sum(count for (turn, _), count in results.items() if turn == turn_id)
            if stored != CALLS_PER_TURN:
                violations.append(
                    f"{session_id}: turn {turn_id} answered after {stored} tool results"
                )
        for record in snapshot.tool_calls:
            if record.status.value not in FINAL_STATUSES:
                violations.append(
                    f"{session_id}: tool call {record.tool_call_id} left {record.status.value}"
                )


def _settled(snapshot: AgentSnapshot) -> bool:
    """Waiting for a user message with no turn running and nothing queued."""
    state = snapshot.state
    return (
        state is not None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        and state.active_turn_id is None
        and snapshot.queued_message_count == 0
        and not snapshot.queued_messages
    )


async def _all_messages(sessions: AgentSessionTestClient, session_id: str) -> list[AgentMessage]:
    messages = [message async for message in sessions.iter_messages(session_id)]
    return sorted(messages, key=lambda message: message.sequence)


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


def serve_worker_forks(arguments: Sequence[str]) -> int:
    """The fuzz's fork server: build each ``factory=state_directory`` scenario's Flow once,
    then fork a Worker serving them all whenever the fuzzer asks."""
    flows: list[dex.Flow[Any]] = []
    for argument in arguments:
        factory, _, state = argument.partition("=")
        flows.append(build_scenario_flow(factory, Path(state)))
    return serve_forks(flows)


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
    parser.add_argument(
        "--runners",
        default=",".join(available_runners()),
        help=f"comma-separated, of {', '.join(RUNNER_FACTORIES)}",
    )
    args = parser.parse_args(arguments)
    runners = [name for name in args.runners.split(",") if name]
    unknown = [name for name in runners if name not in RUNNER_FACTORIES]
    if unknown:
        parser.error(f"unknown runners {unknown}; choose from {list(RUNNER_FACTORIES)}")
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
