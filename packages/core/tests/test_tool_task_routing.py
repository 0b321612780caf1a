"""Where a task poll or cancellation goes: the Stepwise tool source or function tool that
started the task, or an adapter's ``tool_tasks=`` poller; and how a framework tool starts
a task by raising ``StartedToolTask``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from dex_agents import AgentToolCall, AgentToolCallStatus, ToolEffect
from dex_agents.models import (
    ModelToolCall,
    ModelToolDefinition,
    ScriptedModelClient,
    ScriptedModelReply,
)
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    StartedToolTask,
    ToolExecutionResult,
    ToolTaskCancellation,
    ToolTaskForwarding,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollers,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    returning_started_task,
    start_tool_task,
    supports_tool_task_polling,
    tool_task_started_in,
)
from dex_agents.stepwise import AgentDefinition, StepwiseRunner, ToolCallContext, function_tool
from dex_agents.stepwise._mcp import encode_source_reference


class Recorder:
    """A task poller that records what reached it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.polled: list[AgentToolCall] = []
        self.cancelled: list[AgentToolCall] = []

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polled.append(poll.tool_call)
        return ToolExecutionResult(f"{self.name} done")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation.tool_call)


class Events:
    turn_id = "turn-1"
    attempt = 1

    def write_text_delta(self, text: str) -> None: ...
    def write_reasoning_delta(self, text: str) -> None: ...
    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None: ...
    def write_tool_call_finished(self, tool_call_id: str, tool_name: str, status: Any) -> None: ...
    def write_event(self, type: str, payload: Any) -> None: ...


class NotCancelled:
    def is_cancelled(self) -> bool:
        return False


def _record(name: str, reference: str | None = None) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="c1",
        turn_id="turn-1",
        tool_name=name,
        arguments="{}",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=AgentToolCallStatus.WAITING_FOR_TASK,
        deferral_order=0,
        tool_source_reference=reference,
        task_id="job-1",
    )


def _poll(record: AgentToolCall) -> ToolTaskPoll:
    return ToolTaskPoll(
        flow_id="s-1",
        tool_call=record,
        idempotency_key="s-1/turn-1/c1",
        attempt=1,
        events=Events(),
        cancellation=NotCancelled(),
        deadline=datetime.now(UTC),
    )


def _cancellation(record: AgentToolCall) -> ToolTaskCancellation:
    return ToolTaskCancellation(
        flow_id="s-1", tool_call=record, idempotency_key="s-1/turn-1/c1", attempt=1
    )


class TaskSource(Recorder):
    """A tool source whose tools start tasks; it polls them itself."""

    source_name = "jobs"

    async def list_tools(self) -> Sequence[ModelToolDefinition]:
        return []

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        raise NotImplementedError

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolTaskStarted:
        return ToolTaskStarted("job-1", 5)


def _runner(tools: list[Any], sources: list[Any]) -> StepwiseRunner:
    definition = AgentDefinition(
        name="tasks",
        instructions="",
        model=ScriptedModelClient(lambda request: ScriptedModelReply(text="")),
        tools=tools,
        tool_sources=sources,
    )
    return StepwiseRunner(definition)


async def test_stepwise_forwards_to_the_source_with_its_own_reference() -> None:
    source = TaskSource("source")
    runner = _runner([], [source])
    record = _record("remote_job", encode_source_reference("jobs", "ref-7"))
    assert await runner.poll_tool_task(_poll(record)) == ToolExecutionResult("source done")
    await runner.cancel_tool_task(_cancellation(record))
    assert [r.tool_source_reference for r in source.polled + source.cancelled] == ["ref-7"] * 2


async def test_stepwise_forwards_to_the_function_tools_poller() -> None:
    poller = Recorder("tool")

    @function_tool(effect=ToolEffect.READ, tasks=poller)
    async def report(context: ToolCallContext) -> ToolTaskStarted:
        """Start a report."""
        return ToolTaskStarted("job-1", 5)

    runner = _runner([report], [])
    assert await runner.poll_tool_task(_poll(_record("report"))) == ToolExecutionResult("tool done")
    await runner.cancel_tool_task(_cancellation(_record("report")))
    assert len(poller.cancelled) == 1


async def test_stepwise_without_a_poller_fails_the_poll_by_effect_not_as_a_tool_error() -> None:
    @function_tool(effect=ToolEffect.READ)
    async def plain() -> str:
        """No poller."""
        return "x"

    runner = _runner([plain], [])
    with pytest.raises(LookupError, match="has no tasks poller"):
        await runner.poll_tool_task(_poll(_record("plain")))
    with pytest.raises(LookupError, match="cannot poll tasks"):
        await runner.poll_tool_task(_poll(_record("x", encode_source_reference("gone", None))))


async def test_a_function_tool_that_starts_a_task_needs_a_poller() -> None:
    @function_tool(effect=ToolEffect.READ)
    def starts() -> ToolTaskStarted:
        """Starts a task without a poller."""
        return ToolTaskStarted("job-1", 5)

    with pytest.raises(TypeError, match="no tasks poller"):
        await starts.run("{}", _context())


def _context() -> ToolCallContext:
    async def beat() -> None: ...

    return ToolCallContext(
        flow_id="s-1",
        turn_id="turn-1",
        tool_call_id="c1",
        tool_name="t",
        idempotency_key="s-1/turn-1/c1",
        attempt=1,
        events=Events(),
        cancellation=NotCancelled(),
        deadline=datetime.now(UTC),
        heartbeat=beat,
    )


async def test_a_function_tool_may_raise_started_tool_task() -> None:
    @function_tool(effect=ToolEffect.READ, tasks=Recorder("tool"))
    def starts() -> str:
        """Starts a task the adapters' way."""
        start_tool_task("job-9", 2)

    assert await starts.run("{}", _context()) == ToolTaskStarted("job-9", 2)


def test_started_tool_task_is_found_in_groups_and_causes() -> None:
    started = StartedToolTask("job-1", 3)
    assert tool_task_started_in(started) == ToolTaskStarted("job-1", 3)
    assert tool_task_started_in(ExceptionGroup("tools", [ValueError(), started])) == (
        ToolTaskStarted("job-1", 3)
    )
    wrapped = RuntimeError("framework")
    wrapped.__cause__ = started
    assert tool_task_started_in(wrapped) == ToolTaskStarted("job-1", 3)
    assert tool_task_started_in(ValueError("other")) is None


async def test_returning_started_task_passes_other_errors_on() -> None:
    async def raises(error: Exception) -> Any:
        raise error

    assert await returning_started_task(raises(StartedToolTask("job-1", 1))) == ToolTaskStarted(
        "job-1", 1
    )
    with pytest.raises(KeyError):
        await returning_started_task(raises(KeyError("x")))


class Adapter(ToolTaskForwarding):
    pass


async def test_adapter_pollers_by_tool_name_or_for_every_tool() -> None:
    every, named = Recorder("every"), Recorder("named")
    runner = Adapter()
    assert not runner.polls_tool_tasks
    assert not supports_tool_task_polling(runner)
    with pytest.raises(LookupError, match="no tool task poller"):
        await runner.poll_tool_task(_poll(_record("report")))
    await runner.cancel_tool_task(_cancellation(_record("report")))  # nothing to stop

    runner.tool_tasks = ToolTaskPollers({"report": named})
    assert supports_tool_task_polling(runner)
    assert await runner.poll_tool_task(_poll(_record("report"))) == ToolExecutionResult(
        "named done"
    )
    runner.tool_tasks = ToolTaskPollers(every)
    await runner.cancel_tool_task(_cancellation(_record("anything")))
    assert [r.tool_name for r in every.cancelled] == ["anything"]


def test_a_poller_without_both_methods_is_refused() -> None:
    class PollOnly:
        async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
            return ToolTaskPending(1)

    with pytest.raises(TypeError, match="report"):
        ToolTaskPollers({"report": PollOnly()})  # type: ignore[dict-item]
