"""The sessions both fault runs drive, and the invariants they check afterwards.

The kill-anywhere fuzzer (``kill_fuzz``) and the multi-process fault injection
(``fault_injection``) run the same workload: sessions of every runner, each turn
calling a read, an idempotent write and an approved non-idempotent write, driven
by a loop that sends a message whenever its session is idle and approves each
charge. Once the faults stop, each session gets one last message whose turn must
complete. The checks then read the tools' own invocation logs and the sessions'
stored state for the invariants ``kill_fuzz``'s docstring lists.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import dex

from dex_agents._values import AgentMessage, AgentSnapshot, AgentStatus, ToolEffect
from dex_agents.session._flow import AgentSessionFlow
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
from dex_agents.testing._worker_fork_server import serve_forks

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
LOST_AFTER_SECONDS = 15.0
SESSION_NOTE_PREFIX = "[Dex] "
"""Notes the session stores as user messages (a failed turn's summary, for one)."""
SCRIPT_TURNS = 400
"""Turns the scripted model can play per session: more than any run completes."""
CALL_TIMEOUT_SECONDS = 10.0
"""How long a driver's RPC may take before the driver gives up on it and tries again
(a black-holed link never answers)."""


def _turn(number: int) -> tuple[ModelTurn, ModelTurn]:
    """Turn ``number``'s responses: the three calls, then an answer quoting their results.

    Call IDs are unique across the session, as a real model's are.
    """
    calls = [
        ToolCallSpec(name, arguments, tool_call_id=f"t{number}-{name}") for name, arguments in CALLS
    ]
    return ModelTurn(tool_calls=calls), ModelTurn(text_from_tool_results=True)


def available_runners() -> list[str]:
    """The runners whose package is installed (Stepwise always is)."""
    return [
        name
        for name, factory in RUNNER_FACTORIES.items()
        if importlib.util.find_spec(factory.split(":", 1)[0].split(".", 1)[0]) is not None
    ]


def add_runners_argument(parser: argparse.ArgumentParser) -> None:
    """A command's ``--runners`` option: comma-separated names, every installed one by default."""
    parser.add_argument(
        "--runners",
        default=",".join(available_runners()),
        help=f"comma-separated, of {', '.join(RUNNER_FACTORIES)}",
    )


def chosen_runners(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The ``--runners`` names; an unknown one ends the command with a usage error."""
    runners = [name for name in args.runners.split(",") if name]
    unknown = [name for name in runners if name not in RUNNER_FACTORIES]
    if unknown:
        parser.error(f"unknown runners {unknown}; choose from {list(RUNNER_FACTORIES)}")
    return runners


class SessionFigures(Protocol):
    """What the checks count into: a run's report."""

    turns_completed: int
    turns_failed: int
    tool_runs: int
    turns_by_runner: Counter[str]
    violations: list[str]


@dataclass(frozen=True)
class FuzzRunner:
    """One runner's scenario: its state directory (script, tool-run log) and Flow."""

    name: str
    state: Path
    flow: AgentSessionFlow

    @property
    def worker_argument(self) -> str:
        """How the fork server names this scenario: ``factory=state_directory``."""
        return f"{RUNNER_FACTORIES[self.name]}={self.state}"

    @classmethod
    def prepare(cls, name: str, state_root: Path, flow_type_prefix: str) -> FuzzRunner:
        """Write the runner's scenario under ``state_root / name`` and build its Flow."""
        state = state_root / name
        script = ModelScript([r for n in range(1, SCRIPT_TURNS + 1) for r in _turn(n)])
        flow_type = flow_type_prefix + "".join(part.title() for part in name.split("-"))
        Scenario(script=script, tools=TOOLS, session=ScenarioSession(flow_type)).write(state)
        flow = build_scenario_flow(RUNNER_FACTORIES[name], state)
        assert isinstance(flow, AgentSessionFlow)
        return cls(name, state, flow)


@dataclass
class SentMessages:
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


class FuzzSessions:
    """The sessions of one run: their IDs per runner, drivers, and the end checks."""

    def __init__(self, runners: Sequence[FuzzRunner], session_ids: Mapping[str, Sequence[str]]):
        self.runners = list(runners)
        self.session_ids = {name: list(ids) for name, ids in session_ids.items()}
        self.sent = {sid: SentMessages() for ids in self.session_ids.values() for sid in ids}
        self.last_messages: dict[str, str] = {}
        """The message each session got after the faults: its turn must complete."""
        self.faults_done = asyncio.Event()
        """Set when the faults stop: each driver then sends its last message."""

    @property
    def count(self) -> int:
        return len(self.sent)

    def drivers(self, client: dex.AsyncClient) -> list[asyncio.Future[None]]:
        """One running driver per session, over ``client``."""
        return [
            asyncio.ensure_future(self.drive(AgentSessionTestClient(client, runner.flow), sid))
            for runner in self.runners
            for sid in self.session_ids[runner.name]
        ]

    async def drive(self, sessions: AgentSessionTestClient, session_id: str) -> None:
        """Send a message whenever the session is idle and approve each charge; once the
        faults are over, send one last message and return when its turn has settled."""
        sent = self.sent[session_id]
        started = False
        last: str | None = None
        while True:
            try:
                if not started:
                    await self._start(sessions, session_id)
                    started = True
                    continue
                snapshot = await asyncio.wait_for(
                    sessions.snapshot(session_id), CALL_TIMEOUT_SECONDS
                )
                for interrupt in snapshot.pending_interrupts:
                    await asyncio.wait_for(
                        sessions.resolve_interrupt(session_id, interrupt.interrupt_id, True),
                        CALL_TIMEOUT_SECONDS,
                    )
                if settled(snapshot) and sent.caught_up(snapshot):
                    if last is not None and any(m.text == last for m in snapshot.messages):
                        return
                    # Before the end, or the last message was lost with its send: another.
                    text = f"message {len(sent.texts) + 1}"
                    if self.faults_done.is_set():
                        last = self.last_messages[session_id] = text
                    sent.texts.append(text)
                    accepted = await asyncio.wait_for(
                        sessions.send_user_message(session_id, text), CALL_TIMEOUT_SECONDS
                    )
                    if accepted:
                        sent.confirmed.add(text)
            except Exception:  # the engine, a Worker or the link is down: try again shortly
                pass
            await asyncio.sleep(0.1)

    async def _start(self, sessions: AgentSessionTestClient, session_id: str) -> None:
        """Start the session; when the start died with a fault, find out if it happened."""
        sent = self.sent[session_id]
        if not sent.texts:
            sent.texts.append("message 1")
        try:
            await asyncio.wait_for(
                sessions.start_session(session_id, "message 1"), CALL_TIMEOUT_SECONDS
            )
            sent.confirmed.add("message 1")
        except Exception:
            # Raises unless the session exists.
            await asyncio.wait_for(sessions.snapshot(session_id), CALL_TIMEOUT_SECONDS)

    async def check(self, client: dex.AsyncClient, report: SessionFigures) -> None:
        """Every invariant, from the tool-run logs and each session's stored state."""
        for runner in self.runners:
            self._check_tool_runs(runner, report)
            sessions = AgentSessionTestClient(client, runner.flow)
            for session_id in self.session_ids[runner.name]:
                try:
                    snapshot = await asyncio.wait_for(sessions.snapshot(session_id), 30)
                    messages = await asyncio.wait_for(all_messages(sessions, session_id), 60)
                except Exception as error:
                    report.violations.append(f"{session_id}: unreadable at the end: {error}")
                    continue
                self._check_session(runner.name, session_id, snapshot, messages, report)

    def _check_tool_runs(self, runner: FuzzRunner, report: SessionFigures) -> None:
        runs = InvocationLog(runner.state / TOOL_RUNS_LOG).invocations()
        report.tool_runs += len(runs)
        per_key = Counter(run.idempotency_key for run in runs if run.tool_name == "charge_card")
        for key, count in per_key.items():
            if count > 1:
                report.violations.append(f"{runner.name}: charge_card ran {count} times for {key}")
        sessions = set(self.session_ids[runner.name])
        for run in runs:
            key = run.idempotency_key or ""
            if run.tool_name != "lookup_order" and key.split("/", 1)[0] not in sessions:
                report.violations.append(
                    f"{runner.name}: {run.tool_name} ran with a foreign key {key!r}"
                )

    def _check_session(
        self,
        runner: str,
        session_id: str,
        snapshot: AgentSnapshot,
        messages: Sequence[AgentMessage],
        report: SessionFigures,
    ) -> None:
        violations = report.violations
        state = snapshot.state
        if state is None:
            violations.append(f"{session_id}: no state at the end")
            return
        if not settled(snapshot) or snapshot.pending_interrupts:
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
        report.turns_completed += len(answered_turns)
        report.turns_by_runner[runner] += len(answered_turns)
        report.turns_failed += len({m.turn_id for m in messages} - answered_turns)
        last = self.last_messages.get(session_id)
        if not any(m.text == last and m.turn_id in answered_turns for m in messages):
            violations.append(f"{session_id}: no turn completed after the faults")
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


def settled(snapshot: AgentSnapshot) -> bool:
    """Waiting for a user message with no turn running and nothing queued."""
    state = snapshot.state
    return (
        state is not None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        and state.active_turn_id is None
        and snapshot.queued_message_count == 0
        and not snapshot.queued_messages
    )


async def all_messages(sessions: AgentSessionTestClient, session_id: str) -> list[AgentMessage]:
    messages = [message async for message in sessions.iter_messages(session_id)]
    return sorted(messages, key=lambda message: message.sequence)


def serve_worker_forks(arguments: Sequence[str]) -> int:
    """A fuzz fork server: build each ``factory=state_directory`` scenario's Flow once,
    then fork a Worker serving them all whenever the run asks."""
    flows: list[dex.Flow[Any]] = []
    for argument in arguments:
        factory, _, state = argument.partition("=")
        flows.append(build_scenario_flow(factory, Path(state)))
    return serve_forks(flows)
