"""The suite's harness: one scenario run = a state directory, a Flow, Worker children, a client.

Workers always run as child processes (``dex_agents.testing.scenario_worker``),
so every scenario can SIGKILL them. The test process builds the same Flow with
the adapter's factory for its Client.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.testing import (
    MODEL_CALL_LOG_NAME,
    MODEL_CALLS_LOG,
    STATE_DIRECTORY_VARIABLE,
    SUMMARY_CALL_LOG_NAME,
    TOOL_RUNS_LOG,
    AgentSessionTestClient,
    AgentTestEnvironment,
    FileGate,
    Invocation,
    InvocationLog,
    KillableWorkerProcess,
    ModelScript,
    PrivateDexEngine,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    StepOutcome,
    build_scenario_flow,
    executed_step_types,
    read_step_history,
)
from dex_agents_conformance.adapter import Capability, ConformanceAdapter
from dex_agents_conformance.diagnosis import defect_rule, failure_summary, last_traceback
from dex_agents_conformance.rules import ContractRule, checking

SCENARIO_WORKER_MODULE = "dex_agents.testing.scenario_worker"


class ScenarioRun:
    """One running scenario: its session client, Workers, gates and logs."""

    def __init__(
        self,
        *,
        adapter: ConformanceAdapter,
        engine: PrivateDexEngine,
        state_directory: Path,
        flow: AgentSessionFlow,
        environment: AgentTestEnvironment,
    ) -> None:
        self.adapter = adapter
        self.engine = engine
        self.state_directory = state_directory
        self.flow = flow
        self.environment = environment
        self.sessions = AgentSessionTestClient(environment.client, flow)
        self.session_id = f"session-{uuid.uuid4().hex[:12]}"
        self.tool_runs = InvocationLog(state_directory / TOOL_RUNS_LOG)
        self._model_calls = InvocationLog(state_directory / MODEL_CALLS_LOG)
        self._worker_count = 0

    def start_worker(self) -> KillableWorkerProcess:
        """Start one more Worker child for the scenario's Flow; returns once it registered."""
        self._worker_count += 1
        return self.environment.start_worker_process(
            log_path=self.state_directory / f"worker-{self._worker_count}.log",
            entry_module=SCENARIO_WORKER_MODULE,
            arguments=[self.adapter.factory],
            environment={STATE_DIRECTORY_VARIABLE: str(self.state_directory)},
        )

    def kill_workers(self) -> None:
        """SIGKILL every running Worker child of the scenario."""
        self.environment.kill_worker_processes()

    def gate(self, name: str) -> FileGate:
        return FileGate(self.state_directory, name)

    def model_calls(
        self, turn_id: str | None = None, position: int | None = None
    ) -> list[Invocation]:
        """Recorded model calls, optionally of one turn and one position in it."""
        return [
            call
            for call in self._model_calls.invocations(MODEL_CALL_LOG_NAME)
            if (turn_id is None or call.details["turn_id"] == turn_id)
            and (position is None or call.details["position"] == position)
        ]

    def summary_calls(self) -> list[Invocation]:
        """Recorded summary calls (``play_scripted_summary``), in order."""
        return self._model_calls.invocations(SUMMARY_CALL_LOG_NAME)

    def model_call(self, turn_id: str, position: int) -> Invocation:
        """The one recorded model call of ``turn_id`` at ``position``; a clear error otherwise."""
        calls = self.model_calls(turn_id, position)
        if len(calls) == 1:
            return calls[0]
        if not calls:
            raise AssertionError(
                f"no model call of {turn_id} at position {position} was recorded: the scripted"
                " model records each call first thing (play_scripted_model_call does it)"
            )
        attempts = [call.details["attempt"] for call in calls]
        raise AssertionError(
            f"{len(calls)} model calls of {turn_id} at position {position} were recorded"
            f" (attempts {attempts}), one expected: play_scripted_model_call records the call"
            " itself, so do not also call record_model_call; and take the position from the"
            " turn's state, never from process memory"
        )

    async def start_session(
        self,
        initial_message: str | None,
        *,
        config: dex.FlowConfig | None = None,
        session_settings: Mapping[str, Any] | None = None,
    ) -> None:
        await self.sessions.start_session(
            self.session_id, initial_message, config=config, session_settings=session_settings
        )

    async def step_types(self) -> list[str]:
        """Executed Step types of the session, in history order."""
        history = await read_step_history(self.engine.server_address, self.session_id)
        return executed_step_types(history)

    async def diagnosis(self) -> str:
        """What a maintainer needs to see why a scenario failed, in a few lines.

        The session's last turn error, the Step attempts that failed (the runner's
        exception as the engine recorded it), the tail of the last traceback in each
        Worker log, and the logs' paths. Never raises and never waits long: it runs
        while a failure is already on its way.
        """
        lines = [f"what the session says ({self.adapter.name}, session {self.session_id}):"]
        try:
            async with asyncio.timeout(10):
                snapshot = await self.sessions.snapshot(self.session_id)
                history = await read_step_history(self.engine.server_address, self.session_id)
        except Exception as error:
            lines.append(f"  (could not read the session: {type(error).__name__}: {error})")
        else:
            state = snapshot.state
            last_turn_error = state.last_turn_error if state is not None else None
            lines.append(f"  last_turn_error: {last_turn_error!r}")
            failed = [e for e in history if e.outcome is StepOutcome.FAILED]
            for entry in failed[-6:]:
                lines.append(
                    f"  {entry.step_type} ({entry.method.value}) failed on attempt"
                    f" {entry.final_attempt}: {failure_summary(entry.failure_message)}"
                )
            for text in [last_turn_error or "", *(e.failure_message for e in failed)]:
                rule = defect_rule(text)
                if rule is not None:
                    lines.append(f"  that runner defect breaks {rule.note()}")
                    break
        for number in range(1, self._worker_count + 1):
            log = self.state_directory / f"worker-{number}.log"
            lines.append(f"  Worker log: {log}")
            tail = last_traceback(log)
            if tail:
                lines.extend(f"    {line}" for line in tail)
        return "\n".join(lines)

    async def close(self) -> None:
        await self.environment.close()


class ConformanceHarness:
    """Creates scenario runs for one adapter on one engine."""

    def __init__(
        self, adapter: ConformanceAdapter, engine: PrivateDexEngine, state_root: Path
    ) -> None:
        self.adapter = adapter
        self.engine = engine
        self.state_root = state_root

    def require(self, *capabilities: Capability) -> None:
        """Skip the scenario, with a reason, when the adapter lacks a capability."""
        reason = self.adapter.skip_reason(list(capabilities))
        if reason is not None:
            pytest.skip(reason)

    @asynccontextmanager
    async def run(
        self,
        script: ModelScript,
        tools: Sequence[ScenarioTool] = (),
        *,
        interrupt_deadline: timedelta | None = None,
        start_worker: bool = True,
        built_in_tools: Sequence[str] = (),
        plan_mode_enabled: bool = False,
        session: ScenarioSession | None = None,
    ) -> AsyncGenerator[ScenarioRun]:
        """Write the scenario, build its Flow under a fresh Flow type, and start a Worker."""
        flow_type = f"Conformance{uuid.uuid4().hex[:12]}"
        state_directory = self.state_root / flow_type
        scenario = Scenario(
            script=script,
            tools=tools,
            session=(
                replace(session, flow_type=flow_type)
                if session is not None
                else ScenarioSession(
                    flow_type,
                    interrupt_deadline=interrupt_deadline,
                    built_in_tools=tuple(built_in_tools),
                    plan_mode_enabled=plan_mode_enabled,
                )
            ),
        )
        scenario.write(state_directory)
        with checking(ContractRule.FLOW_TYPE):
            flow: dex.Flow[Any] = build_scenario_flow(self.adapter.factory, state_directory)
            if not isinstance(flow, AgentSessionFlow):
                raise TypeError(
                    f"{self.adapter.factory} must return a session Flow from"
                    f" create_agent_session_flow, got {type(flow).__name__}"
                )
        environment = await AgentTestEnvironment.start(
            server_address=self.engine.server_address, flows=[flow]
        )
        run = ScenarioRun(
            adapter=self.adapter,
            engine=self.engine,
            state_directory=state_directory,
            flow=flow,
            environment=environment,
        )
        try:
            if start_worker:
                run.start_worker()
            yield run
        except Exception as error:
            error.add_note(await run.diagnosis())
            raise
        finally:
            await run.close()
