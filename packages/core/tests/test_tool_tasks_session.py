"""Tool tasks through the real engine: a Stepwise agent whose tool starts jobs in a real
HTTP job service, polled by ``PollToolTask``; the task's questions, its failure, and
``cancel_turn`` abandoning it. A runner without a poller records the call by effect."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import (
    AgentToolCallStatus,
    AgentUsage,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents._texts import MISSING_TOOL_TASK_POLLER
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolTaskStarted,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)
from dex_agents.values import FrameworkMessage

FLOWS = Path(__file__).resolve().parent / "worker_flows"
sys.path.insert(0, str(FLOWS))
from job_service import JobService, build_flows  # noqa: E402  # pyright: ignore[reportMissingImports]

sys.path.remove(str(FLOWS))


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with JobService() as running:
        monkeypatch.setenv("JOB_SERVICE_URL", running.url)
        yield running


async def _environment(flow: Any, **options: Any) -> AgentTestEnvironment:
    return await AgentTestEnvironment.start(flows=[flow], worker_in_process=True, **options)


def _sid() -> str:
    return f"tasks-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def reports(service: Any) -> AsyncIterator[tuple[AgentSessionTestClient, Any]]:
    flow = build_flows()[0]
    async with await _environment(flow) as environment:
        yield AgentSessionTestClient(environment.client, flow), environment


async def _started(sessions: AgentSessionTestClient, sid: str) -> Any:
    snapshot = await sessions.wait_for_snapshot(
        sid,
        lambda s: any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in s.tool_calls),
        description="a started task",
    )
    return snapshot.tool_calls[0]


async def test_a_task_question_is_answered_through_answer_question(
    service: Any, reports: tuple[AgentSessionTestClient, Any]
) -> None:
    sessions, environment = reports
    sid = _sid()
    await sessions.start_session(sid, "report please: ask")
    question = await sessions.wait_for_interrupt(sid)
    record = (await sessions.snapshot(sid)).tool_calls[0]
    assert question.interrupt_id == f"{record.tool_call_id}-input-1"
    assert question.question == "Which format?"
    assert question.choices == ("pdf", "csv")
    assert record.status is AgentToolCallStatus.AWAITING_ANSWER
    assert record.task_id == "job-1"
    assert not await sessions.answer_question(sid, question.interrupt_id, "xlsx")
    assert await sessions.answer_question(sid, question.interrupt_id, "csv")
    done = await sessions.wait_for_completed_turns(sid, 1)
    events = await sessions.read_events_through_turn(sid, "turn-1")
    history = await read_step_history(environment.server_address, sid)

    assert done.messages[-1].text == "report as csv"
    assert service.answers == [("job-1", "answered", "csv")]
    assert service.start_requests[f"{sid}/turn-1/{record.tool_call_id}"] == 1
    started = [e for e in events if e.type == "tool_task_started"]
    assert [json.loads(e.payload) for e in started] == [
        {"tool_call_id": record.tool_call_id, "tool_name": "make_report", "task_id": "job-1"}
    ]
    resolved = [e for e in events if e.type == "interrupt_resolved"]
    assert json.loads(resolved[0].payload)["answered"] is True
    steps = executed_step_types(history)
    assert steps.count("CallTool") == 1
    assert steps.count("AwaitQuestionAnswer") >= 1


async def test_a_declined_task_question_goes_back_to_the_task(
    service: Any, reports: tuple[AgentSessionTestClient, Any]
) -> None:
    sessions, _ = reports
    sid = _sid()
    await sessions.start_session(sid, "report please: ask")
    question = await sessions.wait_for_interrupt(sid)
    assert await sessions.resolve_interrupt(sid, question.interrupt_id, False, "not now")
    done = await sessions.wait_for_completed_turns(sid, 1)
    assert done.messages[-1].text == "report as pdf (declined)"
    assert service.answers == [("job-1", "declined", None)]


async def test_a_task_question_past_its_deadline_goes_back_as_deadline_passed(
    service: Any,
) -> None:
    flow = build_flows(
        flow_type="JobReportsDeadlineAgent", interrupt_deadline=timedelta(seconds=1)
    )[0]
    async with await _environment(flow) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        sid = _sid()
        await sessions.start_session(sid, "report please: ask")
        done = await sessions.wait_for_completed_turns(sid, 1)
    assert done.messages[-1].text == "report as pdf (deadline_passed)"
    assert service.answers == [("job-1", "deadline_passed", None)]


async def test_a_failed_task_records_failed_with_its_error(
    service: Any, reports: tuple[AgentSessionTestClient, Any]
) -> None:
    sessions, _ = reports
    sid = _sid()
    await sessions.start_session(sid, "report please: slow")
    record = await _started(sessions, sid)
    service.fail(record.task_id, "the printer is on fire")
    done = await sessions.wait_for_completed_turns(sid, 1)
    assert done.messages[-1].text == "the printer is on fire"


async def test_cancel_turn_abandons_the_task_and_cancels_it_once(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long interval: PollToolTask waits on its Timer when cancel_turn arrives.
    monkeypatch.setenv("JOB_POLL_INTERVAL_SECONDS", "3600")
    flow = build_flows(flow_type="JobReportsCancelAgent")[0]
    async with await _environment(flow) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        sid = _sid()
        await sessions.start_session(sid, "report please: slow")
        record = await _started(sessions, sid)
        assert record.task_poll_interval_seconds == 3600
        assert await sessions.cancel_turn(sid)
        events = await sessions.read_events_through_turn(sid, "turn-1")
        done = await sessions.wait_for_turn(sid, 1)
        history = await read_step_history(environment.server_address, sid)

    finished = [e for e in events if e.type == "tool_call_finished"]
    assert [json.loads(e.payload)["status"] for e in finished] == ["outcome_unknown"]
    assert events[-1].type == "turn_cancelled"
    assert service.cancels == {"job-1": 1}
    assert service.jobs["job-1"].status == "cancelled"
    # Stepwise stores the turn's transcript: the abandoned call's result is outcome_unknown.
    assert done.messages[-1].tool_name == "make_report"
    assert done.messages[-1].tool_output == OUTCOME_UNKNOWN_TOOL_RESULT
    steps = executed_step_types(history)
    assert steps.count("CancelToolTask") == 1
    assert "PollToolTask" not in steps


async def test_steering_waits_for_a_started_task(
    service: Any, reports: tuple[AgentSessionTestClient, Any]
) -> None:
    sessions, _ = reports
    sid = _sid()
    await sessions.start_session(sid, "report please: slow")
    record = await _started(sessions, sid)
    assert await sessions.steer_user_message(sid, text="and another thing")
    await sessions.wait_for_snapshot(
        sid, lambda s: bool(s.steered_messages), description="a steered message"
    )
    still = await sessions.snapshot(sid)
    assert still.tool_calls[0].status is AgentToolCallStatus.WAITING_FOR_TASK
    service.finish(record.task_id, "report ready")
    done = await sessions.wait_for_completed_turns(sid, 2)
    # The steered turn ended after the task's result; the task was never rejected.
    assert [m.tool_output for m in done.messages if m.role == "tool"] == ["report ready"]
    assert done.messages[-1].text == "echo: and another thing"


# --- a runner without poll_tool_task ------------------------------------------------


def _message(role: str, text: str) -> FrameworkMessage:
    return FrameworkMessage(role=role, framework_item=json.dumps([role, text]), text=text)  # type: ignore[arg-type]


class NoPollerRunner:
    """Its tool starts a task, but it cannot poll tasks."""

    def __init__(self) -> None:
        self.supports: list[bool] = []

    def build_user_message(self, text: str) -> FrameworkMessage:
        return _message("user", text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            call = DeferredToolCall("c1", "lookup", "{}", turn.resolve_tool_policy("lookup"))
            return ToolCallsRequested(
                framework_run_state="r", tool_calls=[call], usage=AgentUsage()
            )
        summary = " | ".join(
            f"{r.status.value}:{describe_tool_call_outcome(r)}" for r in turn.tool_calls
        )
        return TurnCompleted(new_messages=[_message("assistant", summary)], usage=AgentUsage())

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution
    ) -> ToolExecutionResult | ToolTaskStarted:
        self.supports.append(call.supports_tool_tasks)
        return ToolTaskStarted("task-1", 5)


@pytest.mark.parametrize(
    ("effect", "status"),
    [(ToolEffect.READ, "failed"), (ToolEffect.IDEMPOTENT_WRITE, "outcome_unknown")],
)
async def test_a_runner_without_a_poller_records_the_call_by_effect(
    effect: ToolEffect, status: str
) -> None:
    runner = NoPollerRunner()
    flow = create_agent_session_flow(
        runner,
        f"NoPoller{effect.name.title().replace('_', '')}Agent",
        tool_policies={"lookup": ToolPolicy(effect=effect)},
    )
    async with await _environment(flow) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        sid = _sid()
        await sessions.start_session(sid, "go")
        done = await sessions.wait_for_completed_turns(sid, 1)
    assert runner.supports == [False]
    if status == "failed":
        assert done.messages[-1].text == f"failed:{MISSING_TOOL_TASK_POLLER}"
    else:
        assert (done.messages[-1].text or "").startswith("outcome_unknown:")


async def test_each_poll_is_an_execute_tool_span(service: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dex_agents.tracing import TracingOptions

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingOptions(tracer_provider=provider, agent_name="Reports")
    flow = build_flows(flow_type="JobReportsTracedAgent", tracing=tracing)[0]
    async with await _environment(flow) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        sid = _sid()
        await sessions.start_session(sid, "report please: slow")
        record = await _started(sessions, sid)
        service.finish(record.task_id, "report ready")
        await sessions.wait_for_completed_turns(sid, 1)
    tool_spans = [
        span for span in exporter.get_finished_spans() if span.name == "execute_tool make_report"
    ]
    step_types = [span.attributes["dex.step.type"] for span in tool_spans if span.attributes]
    assert step_types[0] == "CallTool"
    assert set(step_types[1:]) == {"PollToolTask"}
    assert len(step_types) >= 2
