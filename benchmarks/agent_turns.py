"""A durable agent turn per framework: plain, as a dex-agents session, and under DBOS.

One turn is the issue's "read tool" turn: the scripted model asks for one
``lookup_order`` call, the tool answers, and the model answers with the tool's
text (two model requests and one read tool call). The same scripted agent runs:

- **plain**: the framework's own loop with the history kept in memory (the floor);
- **session**: the same agent under a dex-agents session on the embedded engine
  (``AgentHost``; the engine runs in this process on the host's event loop, the
  default, or on its own thread with ``--engine thread``, or as a child process
  with ``--engine child``; the host's Client and Worker reach an embedded engine
  in process, or by loopback gRPC with ``--transport grpc``), the client sending
  the message and following the event stream until ``turn_completed``;
- **dbos** (Pydantic AI and OpenAI Agents, DBOS's own integrations): ``agent.run``
  inside a ``@DBOS.workflow`` with Pydantic AI's ``DBOSDurability`` capability, and
  ``DBOSRunner.run`` (``dbos-openai-agents``) inside one, the tool a ``@DBOS.step``
  in both (the session runs it as a Step too), on SQLite.

Durability is equal on both sides (``--durability``, default both pairs, each its own
interleaved run in a child process): ``process-crash`` runs the engine in its default
mode (WAL, ``synchronous=NORMAL``: a commit survives the process, not a power loss)
against DBOS on the same SQLite settings (WAL, ``synchronous=NORMAL``);
``power-loss`` runs the engine with ``synchronous=FULL`` (an fsync per commit) against
DBOS's default (rollback journal, ``synchronous=FULL``).

Modes run interleaved (turn by turn, round by round) in one process, so machine
noise falls on all of them alike; the ratios are the figures to read. Printed:
p50/p99 latency, CPU per turn (this process plus the engine child), turns per
second with 10 sessions at once and the CPU per turn at that concurrency (``cpu@N``:
a mode's background threads and timers spread over more turns there), the mean cost
of turns 1-50 vs 151-200 of one long session, and what the session adds over plain
at those turns (``+t1-50``, ``+t151-200``) with its growth (``+growth``): the part of
the growth that is ours.

Usage::

    uv run --group bench python benchmarks/agent_turns.py [--frameworks pydantic-ai,...]
        [--turns N] [--long-turns 200] [--concurrent 10] [--engine loop|thread|child]
        [--transport in-process|grpc] [--durability process-crash,power-loss] [--json PATH]

Nothing here asserts a time; it measures and prints. The figures go to
``benchmarks/results/`` as dated JSON with the machine's facts unless ``--json`` names
a file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from _engine import start_engine_process
from _results import load_average, write_results

from dex_agents import AgentHost, AgentSessionFlow, EmbeddedEngineOptions

if TYPE_CHECKING:
    from pydantic_ai import Agent

WARM_UP_SECONDS = 60.0
ORDER_TEXT = "order 42 shipped"


# --- measuring ---------------------------------------------------------------------------


def _process_cpu(pid: int) -> float:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _engine_child_pid() -> int | None:
    """This process's ``dex_local_engine`` child, from ``/proc`` (Linux)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"dex_local_engine" in command:
            return int(entry.name)
    return None


@dataclass
class CpuClock:
    """CPU seconds of this process (every thread) plus the engine child, when there is one."""

    child_pid: int | None = None

    def now(self) -> float:
        own = time.process_time()
        return own + (_process_cpu(self.child_pid) if self.child_pid else 0.0)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary(seconds: Sequence[float]) -> dict[str, float]:
    ms = [value * 1000 for value in seconds]
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(percentile(ms, 0.99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


# --- what a mode is ----------------------------------------------------------------------


class Conversation(Protocol):
    async def turn(self, text: str) -> None: ...


ConversationFactory = Callable[[], Awaitable[Conversation]]


@dataclass
class Framework:
    name: str
    plain: ConversationFactory
    flow: AgentSessionFlow
    durable_rival: ConversationFactory | None = None  # DBOS: Pydantic AI, OpenAI Agents
    closers: list[Callable[[], None]] = field(default_factory=list[Callable[[], None]])


class SessionConversation:
    """A dex-agents session: send the message, follow the event stream to the turn's end."""

    def __init__(self, host: AgentHost, flow: AgentSessionFlow) -> None:
        self.sessions = host.client(flow)
        self.session_id = f"bench-{uuid.uuid4().hex[:12]}"
        self.token = ""
        self.turns = 0

    async def turn(self, text: str) -> None:
        self.turns += 1
        if self.turns > 1:
            # The client's own wait: send, then follow one event stream to the turn's end.
            ended = await self.sessions.send_user_message_and_wait(
                self.session_id, text, resume_token=self.token
            )
            self.token = ended.resume_token
            _check_completed(self.session_id, ended.event)
            return
        await self.sessions.start_session(self.session_id, text)
        async for ended in self.sessions.events(self.session_id, self.token):
            self.token = ended.resume_token
            if ended.event.turn_id == "turn-1" and ended.event.type in TURN_ENDS:
                _check_completed(self.session_id, ended.event)
                return


TURN_ENDS = ("turn_completed", "turn_failed")


def _check_completed(session_id: str, event: Any) -> None:
    if event.type != "turn_completed":
        raise RuntimeError(f"{session_id} {event.turn_id} failed: {event.payload}")


# --- Pydantic AI --------------------------------------------------------------------------


def pydantic_ai_agent(name: str, *, dbos_step: bool = False, **kwargs: Any) -> Agent[None, str]:
    """The benchmark's Pydantic AI agent: a scripted model that calls ``lookup_order``
    once per turn and answers with its result (two model requests, one read tool call).
    ``dbos_step`` makes the tool a ``@DBOS.step`` (a durable step, as the session's tool
    Step is)."""
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from dex_agents import ToolEffect
    from dex_agents_pydantic_ai import dex_tool_metadata

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if isinstance(last, ModelRequest) and returns:
            return ModelResponse(parts=[TextPart(f"Your {returns[0].model_response_str()}")])
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        return ModelResponse(
            parts=[ToolCallPart("lookup_order", {"order_id": "42"}, tool_call_id=call_id)]
        )

    async def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id} shipped"

    if dbos_step:
        from dbos import DBOS

        lookup_order = DBOS.step(name=f"{name}.lookup_order")(lookup_order)
    tool = Tool(lookup_order, metadata=dex_tool_metadata(ToolEffect.READ))
    return Agent(FunctionModel(respond), tools=[tool], name=name, **kwargs)


def pydantic_ai_framework(directory: Path) -> Framework:
    from pydantic_ai.messages import ModelMessage

    from dex_agents_pydantic_ai import create_pydantic_ai_session_flow

    class Plain:
        def __init__(self, agent: Agent[None, str]) -> None:
            self.agent = agent
            self.history: list[ModelMessage] = []

        async def turn(self, text: str) -> None:
            result = await self.agent.run(text, message_history=self.history)
            self.history = result.all_messages()

    plain_agent = pydantic_ai_agent("plain")

    async def plain() -> Conversation:
        return Plain(plain_agent)

    framework = Framework(
        "pydantic-ai",
        plain,
        create_pydantic_ai_session_flow(pydantic_ai_agent("session"), "BenchPydanticAI"),
    )
    if dbos_wanted():
        framework.durable_rival = _pydantic_ai_dbos()
    return framework


def dbos_wanted() -> bool:
    if os.environ.get("BENCH_NO_DBOS"):
        return False
    try:
        import dbos  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        print("dbos is not installed (uv run --group bench ...): no DBOS figures")
        return False
    return True


def _pydantic_ai_dbos() -> ConversationFactory:
    """``agent.run`` in a ``@DBOS.workflow`` with ``DBOSDurability`` (registered now;
    ``DbosRuntime`` launches DBOS once every workflow is)."""
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    agent = pydantic_ai_agent("dbos_bench", dbos_step=True, capabilities=[DBOSDurability()])

    @DBOS.workflow(name="bench_pydantic_ai_turn")
    async def dbos_turn(text: str, history: list[Any]) -> list[Any]:
        result = await agent.run(text, message_history=history)
        return result.all_messages()

    class DbosConversation:
        def __init__(self) -> None:
            self.history: list[Any] = []

        async def turn(self, text: str) -> None:
            self.history = await dbos_turn(text, self.history)

    async def start() -> Conversation:
        return DbosConversation()

    return start


@dataclass
class DbosRuntime:
    """One DBOS for the run (DBOS is a process-wide singleton), launched after every
    framework registered its workflows, on SQLite at the run's durability:
    ``process-crash``: WAL and ``synchronous=NORMAL`` (the engine's default settings);
    ``power-loss``: DBOS's own default (rollback journal, ``synchronous=FULL``)."""

    directory: Path
    durability: str
    launched: bool = False

    def launch(self) -> None:
        from dbos import DBOS, DBOSConfig

        logging.getLogger("dbos").setLevel(logging.WARNING)
        url = f"sqlite:///{self.directory / 'dbos.sqlite'}"
        config: DBOSConfig = {
            "name": "dex-agents-bench",
            "system_database_url": url,
            "log_level": "WARNING",
        }
        if self.durability == "process-crash":
            config["system_database_engine"] = _sqlite_wal_normal_engine(url)
        DBOS(config=config)
        DBOS.launch()
        self.launched = True

    def close(self) -> None:
        if self.launched:
            from dbos import DBOS

            DBOS.destroy(destroy_registry=True)


def _sqlite_wal_normal_engine(url: str) -> Any:
    """A SQLAlchemy engine as DBOS builds its SQLite one (IMMEDIATE transactions, busy
    timeout, foreign keys), in WAL mode with ``synchronous=NORMAL``."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def configure(connection: Any, record: Any) -> None:  # pyright: ignore[reportUnusedFunction]
        del record
        connection.isolation_level = "IMMEDIATE"
        connection.execute("PRAGMA busy_timeout=30000")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")

    return engine


# --- OpenAI Agents --------------------------------------------------------------------------


def openai_agent(name: str, *, dbos_step: bool = False) -> Any:
    """The same turn as an OpenAI Agents agent: a scripted ``Model`` that calls
    ``lookup_order`` once and answers with its result."""
    from agents import Agent, FunctionTool, Model, function_tool, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
    from agents.usage import Usage

    from dex_agents import ToolEffect
    from dex_agents_openai_agents import declare_tool_effect

    class TurnModel(Model):
        """Answers each call with a one-step ``ScriptedModel`` (the SDK's own test model,
        streaming or not): a ``lookup_order`` call, then the tool's text."""

        def _scripted(self, model_input: Any) -> ScriptedModel:
            items = [model_input] if isinstance(model_input, str) else list(model_input)
            last = items[-1] if items else {}
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                output = [assistant_message(f"Your {last.get('output')}")]
            else:
                call_id = f"call-{uuid.uuid4().hex[:8]}"
                output = [function_call("lookup_order", '{"order_id":"42"}', call_id=call_id)]
            return ScriptedModel([ModelStep(output=output, usage=Usage(requests=1))])

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            model = self._scripted(input)
            return await model.get_response(system_instructions, input, *args, **kwargs)

        def stream_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            model = self._scripted(input)
            return model.stream_response(system_instructions, input, *args, **kwargs)

    async def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id} shipped"

    if dbos_step:
        from dbos import DBOS

        lookup_order = DBOS.step(name=f"{name}.lookup_order")(lookup_order)
    tool: FunctionTool = function_tool(lookup_order)
    set_tracing_disabled(True)  # as the session runs it (sdk_tracing=False); nothing to export
    return Agent(
        name=name,
        instructions="Answer the user; use the tools when they help.",
        model=TurnModel(),
        tools=[declare_tool_effect(tool, ToolEffect.READ)],
    )


def openai_agents_framework(directory: Path) -> Framework:
    from agents import Runner

    from dex_agents_openai_agents import create_openai_agents_session_flow

    class Plain:
        def __init__(self, agent: Any) -> None:
            self.agent = agent
            self.history: list[Any] = []

        async def turn(self, text: str) -> None:
            items = [*self.history, {"role": "user", "content": text}]
            result = await Runner.run(self.agent, items)
            self.history = result.to_input_list()

    plain_agent = openai_agent("plain")

    async def plain() -> Conversation:
        return Plain(plain_agent)

    framework = Framework(
        "openai-agents",
        plain,
        create_openai_agents_session_flow(openai_agent("session"), "BenchOpenAIAgents"),
    )
    if dbos_wanted():
        framework.durable_rival = _openai_agents_dbos()
    return framework


def _openai_agents_dbos() -> ConversationFactory:
    """``DBOSRunner.run`` (DBOS's OpenAI Agents integration) in a ``@DBOS.workflow``."""
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner

    agent = openai_agent("dbos_openai_bench", dbos_step=True)

    @DBOS.workflow(name="bench_openai_agents_turn")
    async def dbos_turn(text: str, history: list[Any]) -> list[Any]:
        result = await DBOSRunner.run(agent, [*history, {"role": "user", "content": text}])
        return result.to_input_list()

    class DbosConversation:
        def __init__(self) -> None:
            self.history: list[Any] = []

        async def turn(self, text: str) -> None:
            self.history = await dbos_turn(text, self.history)

    async def start() -> Conversation:
        return DbosConversation()

    return start


# --- every runner, through its conformance factory ----------------------------------------

CONFORMANCE_FACTORIES = {
    "stepwise": "dex_agents.stepwise.conformance:build_stepwise_flow",
    "langgraph": "dex_agents_langgraph.conformance:build_conformance_flow",
    "claude": "dex_agents_claude_sdk.conformance:build_conformance_flow",
}
SCRIPT_TURNS = 400


def conformance_framework(name: str) -> Callable[[Path], Framework]:
    """The runner's conformance agent (a scripted model of its framework, one read tool).

    Plain is the runner driven directly on an in-memory history (``RunnerDriver``:
    its model step, the tool, its model step again), with no session and no engine.
    """

    def build(directory: Path) -> Framework:
        from dex_agents.testing import (
            ModelScript,
            ModelTurn,
            RunnerDriver,
            ScenarioSession,
            ScenarioTool,
            ToolCallSpec,
            load_scenario_factory,
        )
        from dex_agents.values import ToolEffect

        responses: list[ModelTurn] = []
        for number in range(1, SCRIPT_TURNS + 1):
            # One call ID per turn: frameworks match results to calls by ID across the history.
            call = ToolCallSpec("lookup_order", {"order_id": "42"}, tool_call_id=f"call-{number}")
            responses.append(ModelTurn(tool_calls=[call]))
            responses.append(ModelTurn(text_from_tool_results=True))
        tool = ScenarioTool("lookup_order", ToolEffect.READ, text="order {order_id} shipped")
        state = directory / name
        state.mkdir(parents=True, exist_ok=True)
        factory = load_scenario_factory(CONFORMANCE_FACTORIES[name])
        flow_type = "Bench" + name.title().replace("-", "")
        flow = factory(ModelScript(responses), [tool], state, ScenarioSession(flow_type))

        class Plain:
            def __init__(self) -> None:
                self.driver = RunnerDriver(flow.runner, flow_id=f"plain-{uuid.uuid4().hex[:8]}")

            async def turn(self, text: str) -> None:
                driver = self.driver
                driver.start_turn(text)
                outcome = await driver.run_model()
                while not _completed(outcome):
                    await driver.run_tools()
                    outcome = await driver.run_model()

        async def plain() -> Conversation:
            return Plain()

        return Framework(name, plain, flow)

    return build


def _completed(outcome: object) -> bool:
    from dex_agents.runner import TurnCompleted

    return isinstance(outcome, TurnCompleted)


FRAMEWORKS: dict[str, Callable[[Path], Framework]] = {
    "pydantic-ai": pydantic_ai_framework,
    "openai-agents": openai_agents_framework,
    **{name: conformance_framework(name) for name in CONFORMANCE_FACTORIES},
}


# --- the runs -----------------------------------------------------------------------------


@dataclass
class Mode:
    framework: str
    name: str
    start: ConversationFactory
    latencies: list[float] = field(default_factory=list[float])
    cpu: list[float] = field(default_factory=list[float])
    throughput: list[float] = field(default_factory=list[float])
    throughput_cpu: list[float] = field(default_factory=list[float])  # CPU s per turn
    long: list[float] = field(default_factory=list[float])
    long_cpu: list[float] = field(default_factory=list[float])


async def timed_turn(conversation: Conversation, text: str, clock: CpuClock) -> tuple[float, float]:
    cpu = clock.now()
    started = time.perf_counter()
    await conversation.turn(text)
    return time.perf_counter() - started, clock.now() - cpu


async def interleaved_turns(
    modes: Sequence[Mode], turns: int, clock: CpuClock
) -> list[list[tuple[float, float]]]:
    """One fresh conversation per mode, ``turns`` turns, interleaved turn by turn; each
    mode's (seconds, CPU seconds) per turn."""
    conversations = [await mode.start() for mode in modes]
    timings: list[list[tuple[float, float]]] = [[] for _ in modes]
    for number in range(1, turns + 1):
        for index, conversation in enumerate(conversations):
            timings[index].append(await timed_turn(conversation, f"question {number}", clock))
    return timings


async def latency_rounds(modes: Sequence[Mode], sessions: int, turns: int, clock: CpuClock) -> None:
    """``sessions`` fresh conversations of ``turns`` turns per mode, interleaved turn by turn."""
    for _ in range(sessions):
        for mode, timings in zip(modes, await interleaved_turns(modes, turns, clock), strict=True):
            mode.latencies.extend(seconds for seconds, _ in timings)
            mode.cpu.extend(cpu for _, cpu in timings)


async def throughput_rounds(
    modes: Sequence[Mode], concurrent: int, turns: int, rounds: int, clock: CpuClock
) -> None:
    """``concurrent`` conversations at once, ``turns`` turns each; one mode at a time, rounds
    alternating between the modes, in reverse order every other round so that no mode
    always runs right after the same one. Records turns per second and CPU per turn."""
    for number_of_round in range(rounds):
        for mode in modes if number_of_round % 2 == 0 else list(reversed(modes)):
            conversations = [await mode.start() for _ in range(concurrent)]

            async def run(conversation: Conversation) -> None:
                for number in range(1, turns + 1):
                    await conversation.turn(f"question {number}")

            cpu = clock.now()
            started = time.perf_counter()
            await asyncio.gather(*(run(c) for c in conversations))
            mode.throughput.append(concurrent * turns / (time.perf_counter() - started))
            mode.throughput_cpu.append((clock.now() - cpu) / (concurrent * turns))


async def long_session(modes: Sequence[Mode], turns: int, clock: CpuClock) -> None:
    """One conversation of ``turns`` turns per mode, interleaved turn by turn."""
    for mode, timings in zip(modes, await interleaved_turns(modes, turns, clock), strict=True):
        mode.long.extend(seconds for seconds, _ in timings)
        mode.long_cpu.extend(cpu for _, cpu in timings)


async def working_modes(modes: Sequence[Mode], clock: CpuClock) -> list[Mode]:
    failed: set[str] = set()
    for mode in modes:
        try:
            async with asyncio.timeout(WARM_UP_SECONDS):
                conversation = await mode.start()
                for number in (1, 2):
                    await timed_turn(conversation, f"question {number}", clock)
        except Exception as error:
            print(f"{mode.framework} {mode.name}: warm-up failed, left out: {error!r}")
            failed.add(mode.framework)
    return [mode for mode in modes if mode.framework not in failed]


def ratio(value: float, base: float) -> float | None:
    return round(value / base, 2) if base else None


def report(modes: Sequence[Mode]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for mode in modes:
        entry: dict[str, Any] = {**summary(mode.latencies)}
        entry["cpu_ms_per_turn"] = round(statistics.median(mode.cpu) * 1000, 2)
        if mode.throughput:
            entry["turns_per_second_concurrent"] = round(statistics.median(mode.throughput), 1)
            cpu_at_n = statistics.median(mode.throughput_cpu) * 1000
            entry["cpu_ms_per_turn_concurrent"] = round(cpu_at_n, 2)
        if len(mode.long) >= 100:
            head = statistics.fmean(mode.long[:50]) * 1000
            tail = statistics.fmean(mode.long[-50:]) * 1000
            entry["long_first_50_mean_ms"] = round(head, 2)
            entry["long_last_50_mean_ms"] = round(tail, 2)
            entry["long_growth"] = round(tail / head, 2)
            cpu_head = statistics.fmean(mode.long_cpu[:50]) * 1000
            cpu_tail = statistics.fmean(mode.long_cpu[-50:]) * 1000
            entry["long_cpu_first_50_ms"] = round(cpu_head, 2)
            entry["long_cpu_last_50_ms"] = round(cpu_tail, 2)
            entry["long_cpu_growth"] = round(cpu_tail / cpu_head, 2)
        figures.setdefault(mode.framework, {})[mode.name] = entry
    for per_mode in figures.values():
        plain = per_mode.get("plain")
        session = per_mode.get("session")
        rival = per_mode.get("dbos")
        if plain and session:
            session["added_p50_ms_over_plain"] = round(session["p50_ms"] - plain["p50_ms"], 2)
            session.update(added_long_cost(plain, session))
        if session and rival:
            per_mode["session_vs_dbos"] = {
                "p50": ratio(session["p50_ms"], rival["p50_ms"]),
                "cpu_per_turn": ratio(session["cpu_ms_per_turn"], rival["cpu_ms_per_turn"]),
                "throughput": ratio(
                    session.get("turns_per_second_concurrent", 0),
                    rival.get("turns_per_second_concurrent", 0),
                ),
                "cpu_per_turn_concurrent": ratio(
                    session.get("cpu_ms_per_turn_concurrent", 0),
                    rival.get("cpu_ms_per_turn_concurrent", 0),
                ),
            }
    return figures


def added_long_cost(plain: dict[str, Any], session: dict[str, Any]) -> dict[str, float]:
    """What the session adds over the plain framework at turns 1-50 and 151-200 of the long
    session (mean wall time), and how much that grows: the plain frameworks grow on their
    own, so this is the part of the growth that is the session's."""
    if "long_first_50_mean_ms" not in plain or "long_first_50_mean_ms" not in session:
        return {}
    head = session["long_first_50_mean_ms"] - plain["long_first_50_mean_ms"]
    tail = session["long_last_50_mean_ms"] - plain["long_last_50_mean_ms"]
    added = {"long_added_first_50_ms": round(head, 2), "long_added_last_50_ms": round(tail, 2)}
    if head > 0:
        added["long_added_growth"] = round(tail / head, 2)
    return added


def print_figures(figures: dict[str, Any]) -> None:
    columns = (
        "p50_ms",
        "p99_ms",
        "cpu_ms_per_turn",
        "turns_per_second_concurrent",
        "cpu_ms_per_turn_concurrent",
        "long_first_50_mean_ms",
        "long_last_50_mean_ms",
        "long_growth",
        "long_cpu_first_50_ms",
        "long_cpu_last_50_ms",
        "long_cpu_growth",
        "added_p50_ms_over_plain",
        "long_added_first_50_ms",
        "long_added_last_50_ms",
        "long_added_growth",
    )
    print(f"{'framework':<14}{'mode':<9}" + "".join(f"{c:>14}" for c in _short(columns)))
    for framework, per_mode in figures.items():
        for mode, entry in per_mode.items():
            if mode == "session_vs_dbos":
                continue
            cells = "".join(f"{_cell(entry.get(c)):>14}" for c in columns)
            print(f"{framework:<14}{mode:<9}{cells}")
        if "session_vs_dbos" in per_mode:
            print(f"{framework:<14}session/dbos ratios: {per_mode['session_vs_dbos']}")


def _short(columns: Sequence[str]) -> list[str]:
    names = {
        "turns_per_second_concurrent": "turns/s@N",
        "cpu_ms_per_turn_concurrent": "cpu@N ms",
        "long_first_50_mean_ms": "t1-50 ms",
        "long_last_50_mean_ms": "t151-200 ms",
        "long_growth": "growth",
        "long_cpu_first_50_ms": "cpu t1-50",
        "long_cpu_last_50_ms": "cpu t151-200",
        "long_cpu_growth": "cpu growth",
        "added_p50_ms_over_plain": "+p50 ms",
        "long_added_first_50_ms": "+t1-50 ms",
        "long_added_last_50_ms": "+t151-200 ms",
        "long_added_growth": "+growth",
        "cpu_ms_per_turn": "cpu ms",
    }
    return [names.get(c, c) for c in columns]


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


async def measure(arguments: argparse.Namespace) -> dict[str, Any]:
    names = [name.strip() for name in arguments.frameworks.split(",") if name.strip()]
    unknown = [name for name in names if name not in FRAMEWORKS]
    if unknown:
        raise SystemExit(f"unknown frameworks {unknown}; known: {', '.join(FRAMEWORKS)}")
    durability = arguments.durability
    load_at_start = load_average()
    with tempfile.TemporaryDirectory(prefix="dex-agents-agent-turns-") as temporary:
        root = Path(temporary)
        frameworks = [FRAMEWORKS[name](root) for name in names]
        dbos = DbosRuntime(root, durability)
        if any(f.durable_rival is not None for f in frameworks):
            dbos.launch()
        async with engine_for(arguments, root / "engine.sqlite") as (address, engine_pid):
            try:
                engine_options = EmbeddedEngineOptions(
                    placement="thread" if arguments.engine == "thread" else "loop",
                    transport=arguments.transport,
                    durability=durability,
                )
                async with AgentHost(
                    [f.flow for f in frameworks],
                    server_address=address,
                    database=root / "engine.sqlite",
                    engine_options=engine_options,
                ) as host:
                    clock = CpuClock(engine_pid)
                    modes = await run_modes(arguments, frameworks, host, clock)
            finally:
                dbos.close()
                for framework in frameworks:
                    for close in framework.closers:
                        close()
        return {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": load_average(),  # the run itself adds about 1
            "engine": arguments.engine,
            "transport": arguments.transport if arguments.engine != "child" else "grpc",
            "durability": {
                "name": durability,
                "engine": "WAL, synchronous=NORMAL"
                if durability == "process-crash"
                else "WAL, synchronous=FULL",
                "dbos": "WAL, synchronous=NORMAL"
                if durability == "process-crash"
                else "DBOS default: rollback journal, synchronous=FULL",
            },
            "decode_caches": not arguments.no_decode_cache,
            "turn": "2 model requests + 1 read tool call",
            "options": {
                "sessions": arguments.sessions,
                "turns": arguments.turns,
                "concurrent": arguments.concurrent,
                "concurrent_turns": arguments.concurrent_turns,
                "rounds": arguments.rounds,
                "long_turns": arguments.long_turns,
            },
            "figures": report(modes),
        }


@contextlib.asynccontextmanager
async def engine_for(
    arguments: argparse.Namespace, database: Path
) -> AsyncIterator[tuple[str | None, int | None]]:
    """With ``--engine child``, the engine process at the run's durability: its address and
    PID; otherwise (None, None): the host embeds the engine."""
    if arguments.engine == "child":
        child, address = await asyncio.to_thread(
            start_engine_process,
            database.with_suffix(".child.sqlite"),
            "--durability",
            arguments.durability,
        )
        try:
            yield address, child.pid
        finally:
            child.terminate()
            child.wait(timeout=60)
        return
    yield None, None  # the host's embedded engine (its options carry the durability)


async def run_modes(
    arguments: argparse.Namespace, frameworks: Sequence[Framework], host: AgentHost, clock: CpuClock
) -> list[Mode]:
    modes: list[Mode] = []
    for framework in frameworks:
        flow = framework.flow

        async def session(flow: AgentSessionFlow = flow) -> Conversation:
            return SessionConversation(host, flow)

        modes.append(Mode(framework.name, "plain", framework.plain))
        modes.append(Mode(framework.name, "session", session))
        if framework.durable_rival is not None:
            modes.append(Mode(framework.name, "dbos", framework.durable_rival))
    # Warm every path once (imports, first-run caches), then measure; a framework whose
    # warm-up turns fail or stall is reported and left out.
    modes = await working_modes(modes, clock)
    for mode in modes:
        mode.latencies.clear()
        mode.cpu.clear()
    await latency_rounds(modes, arguments.sessions, arguments.turns, clock)
    await throughput_rounds(
        modes, arguments.concurrent, arguments.concurrent_turns, arguments.rounds, clock
    )
    if arguments.long_turns:
        await long_session(modes, arguments.long_turns, clock)
    return modes


def disable_decode_caches() -> None:
    from dex_agents.values import SESSION_VALUE_DECODE_CACHE, STORED_MESSAGE_DECODE_CACHE

    STORED_MESSAGE_DECODE_CACHE.max_characters = 0
    SESSION_VALUE_DECODE_CACHE.max_characters = 0
    try:
        from dex_agents_pydantic_ai import _messages as messages
    except ImportError:
        return
    messages._DECODED_ITEMS.max_characters = 0  # pyright: ignore[reportPrivateUsage]


DURABILITIES = ("process-crash", "power-loss")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--sessions", type=int, default=4, help="fresh sessions per mode")
    parser.add_argument("--turns", type=int, default=10, help="turns per fresh session")
    parser.add_argument("--concurrent", type=int, default=10)
    parser.add_argument("--concurrent-turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds per mode")
    parser.add_argument("--long-turns", type=int, default=200, help="0 skips the long session")
    parser.add_argument("--engine", choices=("loop", "thread", "child"), default="loop")
    parser.add_argument(
        "--transport",
        choices=("in-process", "grpc"),
        default="in-process",
        help="how the host reaches the embedded engine (--engine loop or thread)",
    )
    parser.add_argument(
        "--durability",
        default=",".join(DURABILITIES),
        help="process-crash (engine default vs DBOS on WAL + synchronous=NORMAL), power-loss "
        "(engine synchronous=FULL vs DBOS's default), or both, comma-separated: each is its "
        "own interleaved run (in a child process when there are two)",
    )
    parser.add_argument(
        "--no-decode-cache",
        action="store_true",
        help="decode every stored message on every Step (the cost before the decode caches)",
    )
    parser.add_argument("--json", type=Path, help="default: benchmarks/results/<date>-...")
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    durabilities = [d.strip() for d in arguments.durability.split(",") if d.strip()]
    unknown = [d for d in durabilities if d not in DURABILITIES]
    if unknown or not durabilities:
        raise SystemExit(f"--durability takes {', '.join(DURABILITIES)}, not {unknown}")
    load = load_average()
    if len(durabilities) == 1:
        arguments.durability = durabilities[0]
        if arguments.no_decode_cache:
            disable_decode_caches()
        results = asyncio.run(measure(arguments))
        print_run(results)
        if arguments.child_output is not None:
            arguments.child_output.write_text(json.dumps(results))
            return
        runs = {durabilities[0]: results}
    else:
        runs = {}
        with tempfile.TemporaryDirectory(prefix="dex-agents-agent-turns-runs-") as temporary:
            for durability in durabilities:
                output = Path(temporary) / f"{durability}.json"
                child_argv = [*(argv if argv is not None else sys.argv[1:])]
                child_argv = _without_option(child_argv, "--durability")
                child_argv = _without_option(child_argv, "--json")
                command = [sys.executable, __file__, *child_argv, "--durability", durability]
                subprocess.run([*command, "--child-output", str(output)], check=True)
                runs[durability] = json.loads(output.read_text())
    write_results("agent_turns", {"runs": runs}, arguments.json, load_at_start=load)


def _without_option(argv: list[str], option: str) -> list[str]:
    kept: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
            continue
        if item == option:
            skip = True
            continue
        if item.startswith(option + "="):
            continue
        kept.append(item)
    return kept


def print_run(results: dict[str, Any]) -> None:
    durability = results["durability"]
    print(
        f"python {results['python']}, {results['cpu_count']} CPUs, engine {results['engine']},"
        f" transport {results['transport']}, durability {durability['name']} (engine"
        f" {durability['engine']}; DBOS {durability['dbos']}), load"
        f" {results['load_average_at_start']}"
    )
    print_figures(results["figures"])


if __name__ == "__main__":
    sys.exit(main())
