"""Session turn throughput and the latency a session adds to a runner.

A turn here is the spec's "read tool" turn: the scripted model asks for one
``read`` tool, the tool answers, and the model answers with the tool's result,
so the session runs ``RunModel``, ``CallTool``, ``ResumeTurn``, ``RunModel``
(plus ``AwaitUserMessage`` taking the next message). The runner is the core's
``ScriptedRunner``; the engine is a private local engine and the Worker a child
process, as in production, while this process is the Client.

It measures:

(a) one session running N turns one after another (default 100): turns per
    second and per-turn latency, from ``send_user_message`` to the
    ``turn_completed`` event;
(b) S sessions at once, K turns each (default 50 x 4): turns per second from
    the first start to the last completed turn, and per-turn latency;
(c) the same turn played by calling the runner directly (two ``run_model_step``
    calls and one ``execute_deferred_tool_call``), and from it the latency the
    session adds per turn and per Step.

Usage::

    uv run python benchmarks/session_turns.py [--turns N] [--sessions S]
        [--turns-per-session K] [--session-codecs] [--json PATH]

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dex

from dex_agents import AgentSessionFlow
from dex_agents.runner import AgentTurnContext, DeferredToolExecution, ToolCallsRequested
from dex_agents.testing import (
    SCRIPTED_FLOW_FACTORY,
    SESSION_CODECS_VARIABLE,
    STATE_DIRECTORY_VARIABLE,
    AgentSessionTestClient,
    AgentTestEnvironment,
    KillableWorkerProcess,
    ModelScript,
    ModelTurn,
    PrivateDexEngine,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ScriptedRunner,
    ToolCallSpec,
    build_scenario_flow,
    executed_step_types,
    read_step_history,
)
from dex_agents.values import AgentMessage, AgentToolCall, AgentToolCallStatus, ToolEffect

LOOKUP = ScenarioTool("lookup_order", ToolEffect.READ, text="order {order_id} shipped")
STEPS_PER_TURN = 4  # RunModel, CallTool, ResumeTurn, RunModel
EVENT_WAIT = timedelta(seconds=5)


def read_tool_script(turns: int) -> ModelScript:
    responses: list[ModelTurn] = []
    for _ in range(turns):
        responses.append(ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]))
        responses.append(ModelTurn(text_from_tool_results=True))
    return ModelScript(responses)


def _child_pids() -> dict[str, int]:
    """This process's children by role: the engine and the Worker (Linux ``/proc``)."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent != os.getpid():
            continue
        if "dex_local_engine" in command:
            found["engine"] = int(entry.name)
        elif "scenario_worker" in command:
            found["worker"] = int(entry.name)
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far; 0 where ``/proc`` is missing."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU time the benchmark, the engine and the Worker spend between two points.

    Less sensitive than wall-clock latency to other work on a shared machine.
    """

    def __init__(self) -> None:
        self.pids = _child_pids()
        self.started = self._now()

    def _now(self) -> dict[str, float]:
        now = {role: cpu_seconds(pid) for role, pid in self.pids.items()}
        now["client"] = time.process_time()
        return now

    def per_unit_ms(self, units: int) -> dict[str, float]:
        ended = self._now()
        return {
            role: round((ended[role] - self.started[role]) * 1000 / max(1, units), 2)
            for role in sorted(ended)
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    milliseconds = [value * 1000 for value in seconds]
    return {
        "p50_ms": round(statistics.median(milliseconds), 2),
        "p99_ms": round(percentile(milliseconds, 0.99), 2),
        "mean_ms": round(statistics.fmean(milliseconds), 2),
    }


class TurnWaiter:
    """Follows one session's ``AgentEvents`` with a resume token, turn by turn."""

    def __init__(self, client: dex.AsyncClient, flow: AgentSessionFlow, session_id: str) -> None:
        self.client = client
        self.flow = flow
        self.session_id = session_id
        self.token = ""

    async def until_turn_ends(self, turn_id: str) -> None:
        while True:
            try:
                message = await self.client.read_stream(
                    self.session_id, self.flow.agent_events, self.token, timeout=EVENT_WAIT
                )
            except dex.LongPollTimeoutError:
                continue
            self.token = message.resume_token
            event = message.value
            if event.turn_id == turn_id and event.type == "turn_completed":
                return
            if event.turn_id == turn_id and event.type == "turn_failed":
                raise RuntimeError(f"{self.session_id} {turn_id} failed: {event.payload}")


async def run_session(
    sessions: AgentSessionTestClient, flow: AgentSessionFlow, session_id: str, turns: int
) -> list[float]:
    """Run ``turns`` read-tool turns in one session; returns each turn's latency."""
    waiter = TurnWaiter(sessions.client, flow, session_id)
    latencies: list[float] = []
    for number in range(1, turns + 1):
        started = time.perf_counter()
        if number == 1:
            await sessions.start_session(session_id, f"question {number}")
        elif not await sessions.send_user_message(session_id, f"question {number}"):
            raise RuntimeError(f"{session_id} refused message {number}")
        await waiter.until_turn_ends(f"turn-{number}")
        latencies.append(time.perf_counter() - started)
    return latencies


class NoEvents:
    turn_id = "turn-1"
    attempt = 1

    def write_text_delta(self, text: str) -> None:
        pass

    def write_reasoning_delta(self, text: str) -> None:
        pass

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        pass

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: AgentToolCallStatus
    ) -> None:
        pass

    def write_event(self, type: str, payload: Mapping[str, Any]) -> None:
        pass


class NeverCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _nothing(*_: object) -> None:
    return None


async def direct_runner_turns(state_directory: Path, turns: int) -> list[float]:
    """The same turn without a session: the runner's own cost per turn."""
    runner = ScriptedRunner(read_tool_script(1), [LOOKUP], state_directory)
    user = runner.build_user_message("question 1")
    messages = [AgentMessage.from_framework_message(user, sequence=1, turn_id="turn-1")]
    durations: list[float] = []
    for _ in range(turns):

        def context(run_state: str | None, records: tuple[AgentToolCall, ...]) -> AgentTurnContext:
            return AgentTurnContext(
                flow_id="direct",
                turn_id="turn-1",
                attempt=1,
                messages=messages,
                framework_run_state=run_state,
                tool_calls=records,
                events=NoEvents(),
                cancellation=NeverCancelled(),
                deadline=datetime.now(UTC),
                step_execution_id="RunModel-1",
                tool_policies={},
                default_tool_effect=ToolEffect.UNCLASSIFIED,
                heartbeat=_nothing,
            )

        started = time.perf_counter()
        request = await runner.run_model_step(context(None, ()))
        assert isinstance(request, ToolCallsRequested)
        [call] = request.tool_calls
        record = AgentToolCall(
            tool_call_id=call.tool_call_id,
            turn_id="turn-1",
            tool_name=call.tool_name,
            arguments=call.arguments,
            effect=call.policy.effect,
            requires_approval=call.policy.requires_approval,
            status=AgentToolCallStatus.APPROVED,
            deferral_order=0,
        )
        result = await runner.execute_deferred_tool_call(
            DeferredToolExecution(
                flow_id="direct",
                tool_call=record,
                idempotency_key=f"direct/turn-1/{call.tool_call_id}",
                attempt=1,
                events=NoEvents(),
                cancellation=NeverCancelled(),
                deadline=datetime.now(UTC),
                heartbeat=_nothing,
                heartbeat_checkpoint=None,
                save_heartbeat_checkpoint=_nothing,
            )
        )
        final = replace(
            record, status=AgentToolCallStatus.SUCCEEDED, output=getattr(result, "output", None)
        )
        await runner.run_model_step(context(request.framework_run_state, (final,)))
        durations.append(time.perf_counter() - started)
    return durations


async def measure(arguments: argparse.Namespace) -> dict[str, Any]:
    turns_per_script = max(arguments.turns, arguments.turns_per_session)
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "turn": "one read tool: RunModel, CallTool, ResumeTurn, RunModel",
        "worker_codecs": "session_codec_registry()" if arguments.session_codecs else "Dex default",
    }
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as temporary:
        root = Path(temporary)
        state = root / "state"
        scenario = Scenario(read_tool_script(turns_per_script), [LOOKUP], ScenarioSession("Bench"))
        scenario.write(state)
        flow = build_scenario_flow(SCRIPTED_FLOW_FACTORY, state)
        assert isinstance(flow, AgentSessionFlow)
        with PrivateDexEngine.start(root / "engine") as engine:
            worker = KillableWorkerProcess.start(
                server_address=engine.server_address,
                log_path=root / "worker.log",
                entry_module="dex_agents.testing.scenario_worker",
                arguments=[SCRIPTED_FLOW_FACTORY],
                environment={
                    STATE_DIRECTORY_VARIABLE: str(state),
                    SESSION_CODECS_VARIABLE: "1" if arguments.session_codecs else "0",
                },
            )
            try:
                async with await AgentTestEnvironment.start(
                    server_address=engine.server_address, flows=[flow]
                ) as environment:
                    sessions = AgentSessionTestClient(environment.client, flow)
                    await run_session(sessions, flow, f"warmup-{uuid.uuid4().hex}", 2)

                    single_id = f"single-{uuid.uuid4().hex}"
                    cpu = CpuMeter()
                    started = time.perf_counter()
                    single = await run_session(sessions, flow, single_id, arguments.turns)
                    single_turns = single[1:] or single
                    single_elapsed = time.perf_counter() - started
                    single_cpu = cpu.per_unit_ms(arguments.turns)
                    steps = executed_step_types(
                        await read_step_history(engine.server_address, single_id)
                    )
                    # Later turns wake AwaitUserMessage too; the first starts from the input.
                    later_turn_steps = (len(steps) - 1 - STEPS_PER_TURN) / max(
                        1, arguments.turns - 1
                    )
                    results["single_session"] = {
                        "turns": arguments.turns,
                        "turns_per_second": round(arguments.turns / single_elapsed, 2),
                        "turn_latency": latency_summary(single_turns),
                        "step_executions_per_later_turn": round(later_turn_steps, 2),
                        "cpu_ms_per_turn": single_cpu,
                    }

                    started = time.perf_counter()
                    concurrent = await asyncio.gather(
                        *(
                            run_session(
                                sessions,
                                flow,
                                f"many-{n}-{uuid.uuid4().hex}",
                                arguments.turns_per_session,
                            )
                            for n in range(arguments.sessions)
                        )
                    )
                    concurrent_elapsed = time.perf_counter() - started
                    all_turns = [latency for session in concurrent for latency in session]
                    results["concurrent_sessions"] = {
                        "sessions": arguments.sessions,
                        "turns_per_session": arguments.turns_per_session,
                        "turns_per_second": round(len(all_turns) / concurrent_elapsed, 2),
                        "turn_latency": latency_summary(all_turns),
                    }
            finally:
                worker.stop(timedelta(seconds=10))

        direct = await direct_runner_turns(root / "direct", max(arguments.turns, 50))
        direct_ms = statistics.median(direct) * 1000
        session_ms = statistics.median(single_turns) * 1000
        added_ms = session_ms - direct_ms
        results["direct_runner"] = {"turn_latency": latency_summary(direct)}
        results["added_by_session"] = {
            "per_turn_p50_ms": round(added_ms, 2),
            "per_step_p50_ms": round(added_ms / STEPS_PER_TURN, 2),
            "note": "single-session p50 turn latency minus direct-runner p50, over 4 Steps",
        }
    results["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    return results


def print_results(results: dict[str, Any]) -> None:
    single = results["single_session"]
    many = results["concurrent_sessions"]
    added = results["added_by_session"]
    print(f"turn: {results['turn']}; Worker codecs: {results['worker_codecs']}")
    print(
        f"{results['cpu_count']} CPUs; load average {results['load_average_at_start'][0]} at"
        f" start, {results['load_average_at_end'][0]} at end (other work skews the figures)"
    )
    print(
        f"one session, {single['turns']} turns: {single['turns_per_second']} turns/s;"
        f" turn p50 {single['turn_latency']['p50_ms']} ms,"
        f" p99 {single['turn_latency']['p99_ms']} ms"
    )
    cpu = single["cpu_ms_per_turn"]
    print(
        "CPU per turn (one session): "
        + ", ".join(f"{role} {milliseconds} ms" for role, milliseconds in cpu.items())
    )
    print(
        f"{many['sessions']} sessions x {many['turns_per_session']} turns:"
        f" {many['turns_per_second']} turns/s; turn p50 {many['turn_latency']['p50_ms']} ms,"
        f" p99 {many['turn_latency']['p99_ms']} ms"
    )
    print(
        f"runner called directly: turn p50 {results['direct_runner']['turn_latency']['p50_ms']} ms"
    )
    print(
        f"added by the session: {added['per_turn_p50_ms']} ms per turn,"
        f" {added['per_step_p50_ms']} ms per Step (p50)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="turns of the single session")
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions")
    parser.add_argument("--turns-per-session", type=int, default=4, help="turns per session")
    parser.add_argument(
        "--session-codecs",
        action="store_true",
        help="the Worker decodes with session_codec_registry() instead of Dex's own codecs",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    arguments = parser.parse_args(argv)
    for name in ("turns", "sessions", "turns_per_session"):
        if getattr(arguments, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    results = asyncio.run(measure(arguments))
    print_results(results)
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
