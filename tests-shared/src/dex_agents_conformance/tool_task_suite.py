"""Conformance scenarios of tool tasks: a tool that starts remote work the session polls.

A ``STARTS_TASK`` scenario tool raises ``StartedToolTask``; ``PollToolTask`` polls the
task on a Timer through the factory's ``ScenarioTaskPoller`` until the test releases the
``task_done`` gate. The scenarios need the opt-in ``TOOL_TASKS`` capability.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import pytest

from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import (
    TASK_CANCEL_LOG_NAME,
    TASK_DONE_GATE,
    TASK_POLL_LOG_NAME,
    ModelScript,
    ModelTurn,
    ScenarioTool,
    ToolBehaviour,
    ToolCallSpec,
    poll_until,
)
from dex_agents.values import AgentToolCallStatus, ToolEffect
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import final_answer, finished_statuses
from dex_agents_conformance.harness import ConformanceHarness, ScenarioRun

FIRST_CALL = "call-0-0"
MAKE_REPORT = ScenarioTool(
    "make_report",
    ToolEffect.IDEMPOTENT_WRITE,
    description="Start a report job; it takes a while.",
    behaviour=ToolBehaviour.STARTS_TASK,
    text="report {name} ready",
)
REPORT_TURN = [
    ModelTurn(tool_calls=[ToolCallSpec("make_report", {"name": "q3"})]),
    ModelTurn(text_from_tool_results=True),
]


async def _wait_for_task(run: ScenarioRun) -> None:
    await run.sessions.wait_for_snapshot(
        run.session_id,
        lambda s: any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in s.tool_calls),
        description="a started tool task",
    )


async def _wait_for_polls(run: ScenarioRun, count: int) -> None:
    await poll_until(
        lambda: run.tool_runs.count(TASK_POLL_LOG_NAME) >= count,
        description=f"{count} task polls",
        within=timedelta(seconds=60),
    )


class ToolTaskScenarios:
    """Tool tasks across a Worker SIGKILL, and ``cancel_turn`` abandoning one."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    async def test_a_tool_task_is_polled_to_its_result_across_a_worker_sigkill(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.TOOL_TASKS)
        async with conformance_harness.run(ModelScript(REPORT_TURN), [MAKE_REPORT]) as run:
            await run.start_session("make the q3 report")
            await _wait_for_task(run)
            snapshot = await run.sessions.snapshot(run.session_id)
            [record] = snapshot.tool_calls
            key = f"{run.session_id}/turn-1/{FIRST_CALL}"
            assert record.task_id == f"task-{key}"
            assert record.task_poll_interval_seconds == 1
            await _wait_for_polls(run, 1)
            run.kill_workers()
            polls_before_restart = run.tool_runs.count(TASK_POLL_LOG_NAME)
            run.start_worker()
            await _wait_for_polls(run, polls_before_restart + 1)
            run.gate(TASK_DONE_GATE).release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "make_report: report q3 ready"
            assert run.tool_runs.count("make_report") == 1, "the tool that started it ran once"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            started = [e.payload_data() for e in events if e.type == "tool_task_started"]
            assert started == [
                {"tool_call_id": FIRST_CALL, "tool_name": "make_report", "task_id": f"task-{key}"}
            ]
            assert finished_statuses(events) == {FIRST_CALL: "succeeded"}
            steps = await run.step_types()
            assert steps.count("CallTool") == 1
            assert steps.count("PollToolTask") >= 2

    async def test_cancel_turn_abandons_a_tool_task_and_cancels_it(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.TOOL_TASKS)
        async with conformance_harness.run(ModelScript(REPORT_TURN), [MAKE_REPORT]) as run:
            await run.start_session("make the q3 report")
            await _wait_for_task(run)
            assert await run.sessions.cancel_turn(run.session_id)
            snapshot = await run.sessions.wait_for_turn(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "outcome_unknown"}
            assert events[-1].type == "turn_cancelled"
            assert run.tool_runs.count(TASK_CANCEL_LOG_NAME) >= 1
            assert run.tool_runs.count("make_report") == 1
            assert snapshot.state is not None
            assert snapshot.state.active_turn_id is None
            outputs = [m.tool_output for m in snapshot.messages if m.role == "tool"]
            texts = [m.text or "" for m in snapshot.messages]
            assert OUTCOME_UNKNOWN_TOOL_RESULT in outputs or any(
                "make_report" in text and "outcome_unknown" in text for text in texts
            )
            assert "CancelToolTask" in await run.step_types()
