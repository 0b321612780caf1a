"""The Step options of the spec's Step table: timeouts, attempts, failure routes, locks, SYNC.

These options decide what a crash or a slow call does to a session, so each is pinned
here against the session Flow's own Steps and the per-call movements ``RunModel`` makes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dex import StepDecision, StepDurability, StepMovement, StepOptions

from dex_agents import AgentUsage, ToolEffect, create_agent_session_flow
from dex_agents.runner import ToolExecutionResult, TurnCompleted
from dex_agents.session._approvals import AwaitToolApproval
from dex_agents.session._failure_routes import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents.session._questions import AwaitQuestionAnswer
from dex_agents.session._routing import ToolStepKind, ToolStepMove, TurnRouting
from dex_agents.session._timers import AwaitTimer
from dex_agents.session._tools import CallSingleAttemptTool, CallTool
from dex_agents.session._turn import (
    RecordTurnFailure,
    ResumeTurn,
    route,
)
from dex_agents.values import FrameworkMessage


class Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: Any) -> TurnCompleted:
        return TurnCompleted(new_messages=(), usage=AgentUsage())

    async def execute_deferred_tool_call(self, call: Any) -> ToolExecutionResult:
        return ToolExecutionResult(output="")


@pytest.fixture
def flow() -> Any:
    return create_agent_session_flow(Runner(), "OptionsAgent")


def _steps(flow: Any) -> dict[str, Any]:
    definitions = flow.get_steps()._definitions
    return {type(definition.step).__name__: definition.step for definition in definitions}


def _is_sync(options: StepOptions) -> bool:
    return (
        options.execute_durability is StepDurability.SYNC
        and options.wait_for_durability is StepDurability.SYNC
    )


def test_every_step_sets_sync_durability_explicitly(flow: Any) -> None:
    steps = _steps(flow)
    assert set(steps) == {
        "StartAgentSession",
        "AwaitUserMessage",
        "RunModel",
        "CallTool",
        "CallSingleAttemptTool",
        "AwaitToolApproval",
        "AwaitQuestionAnswer",
        "AwaitTimer",
        "ResumeTurn",
        "RecordToolFailure",
        "RecordToolOutcomeUnknown",
        "RecordTurnFailure",
        "CompactContext",
        "ApplyTurnControl",
        "FinishTurnCancellation",
        "PollToolTask",
        "CancelToolTask",
    }
    for name, step in steps.items():
        options = step.get_step_options()
        assert options is not None, name
        assert _is_sync(options), name


def test_run_model_timeouts_attempts_and_failure_route(flow: Any) -> None:
    options = _steps(flow)["RunModel"].get_step_options()
    assert options.execute_method_timeout == timedelta(minutes=15)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.execute_retry.maximum_attempts == 3
    assert options.execute_retry.total_duration == timedelta(minutes=30)
    assert options._execute_failure_target is RecordTurnFailure
    failure = options._execute_failure_options
    assert failure is not None
    assert _is_sync(failure)
    assert failure.execute_retry.maximum_interval == timedelta(seconds=5)


def test_failure_routes_cap_their_backoff_at_five_seconds(flow: Any) -> None:
    steps = _steps(flow)
    for name in (
        "RecordToolFailure",
        "RecordToolOutcomeUnknown",
        "RecordTurnFailure",
        "ApplyTurnControl",
        "FinishTurnCancellation",
    ):
        options = steps[name].get_step_options()
        assert options.execute_retry.maximum_interval == timedelta(seconds=5), name


def _movements(flow: Any, *moves: ToolStepMove) -> list[StepMovement[Any]]:
    decision: StepDecision = route(
        flow.session, TurnRouting(tool_steps=tuple(moves), resume_count=len(moves))
    )
    return list(decision.movements)


def test_tool_steps_by_effect_attempts_routes_and_one_record_each(flow: Any) -> None:
    movements = _movements(
        flow,
        ToolStepMove("read-1", ToolStepKind.CALL_TOOL),
        ToolStepMove("write-1", ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL),
    )
    by_step = {m.step: m for m in movements}
    assert set(by_step) == {CallTool, CallSingleAttemptTool, ResumeTurn}
    assert by_step[ResumeTurn].input == 2

    call_tool = by_step[CallTool]
    assert call_tool.input == "read-1"
    assert call_tool.options is not None
    assert _is_sync(call_tool.options)
    assert call_tool.options.execute_retry.maximum_attempts == 3
    assert call_tool.options.heartbeat_timeout == timedelta(minutes=2)
    assert call_tool.options._execute_failure_target is RecordToolFailure
    loads = call_tool.options.execute_load_attribute_map_instances
    assert [(load.attribute_map.name, load.instance) for load in loads] == [
        ("AgentToolCalls", "read-1")
    ]
    route_options = call_tool.options._execute_failure_options
    assert route_options is not None
    assert _is_sync(route_options)
    assert [load.instance for load in route_options.execute_load_attribute_map_instances] == [
        "read-1"
    ]

    single = by_step[CallSingleAttemptTool]
    assert single.options is not None
    assert _is_sync(single.options)
    assert single.options.execute_retry.maximum_attempts == 1
    assert single.options._execute_failure_target is RecordToolOutcomeUnknown


def test_waiting_steps_lock_pending_interrupts(flow: Any) -> None:
    movements = _movements(
        flow,
        ToolStepMove("a", ToolStepKind.AWAIT_APPROVAL),
        ToolStepMove("q", ToolStepKind.AWAIT_QUESTION),
        ToolStepMove("t", ToolStepKind.AWAIT_TIMER),
    )
    by_step = {m.step: m for m in movements}
    assert set(by_step) == {AwaitToolApproval, AwaitQuestionAnswer, AwaitTimer, ResumeTurn}
    for step in (AwaitToolApproval, AwaitQuestionAnswer):
        options = by_step[step].options
        assert options is not None
        assert _is_sync(options)
        assert [lock.attribute.name for lock in options.execute_lock_attributes] == [
            "PendingInterrupts"
        ]
    timer = by_step[AwaitTimer].options
    assert timer is not None
    assert _is_sync(timer)
    steps = _steps(flow)
    resume = steps["ResumeTurn"].get_step_options()
    assert [lock.attribute.name for lock in resume.execute_lock_attributes] == ["PendingInterrupts"]


def test_tool_step_kind_follows_the_effect() -> None:
    from dex_agents.session._routing import tool_step_kind

    assert tool_step_kind(ToolEffect.READ) is ToolStepKind.CALL_TOOL
    assert tool_step_kind(ToolEffect.IDEMPOTENT_WRITE) is ToolStepKind.CALL_TOOL
    assert tool_step_kind(ToolEffect.NON_IDEMPOTENT_WRITE) is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL
    assert tool_step_kind(ToolEffect.UNCLASSIFIED) is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL


@pytest.mark.parametrize(
    ("effect", "route_target"),
    [
        (ToolEffect.READ, RecordToolFailure),
        (ToolEffect.IDEMPOTENT_WRITE, RecordToolFailure),
        (ToolEffect.NON_IDEMPOTENT_WRITE, RecordToolOutcomeUnknown),
        (ToolEffect.UNCLASSIFIED, RecordToolOutcomeUnknown),
    ],
)
def test_poll_tool_task_has_three_attempts_no_lock_and_the_effects_failure_route(
    flow: Any, effect: ToolEffect, route_target: type
) -> None:
    from dataclasses import replace

    from dex_agents.session._moves import poll_movement
    from dex_agents.session._tool_tasks import PollToolTask
    from dex_agents.values import AgentToolCall, AgentToolCallStatus

    record = AgentToolCall(
        tool_call_id="task-1",
        turn_id="turn-1",
        tool_name="report",
        arguments="{}",
        effect=effect,
        requires_approval=False,
        status=AgentToolCallStatus.WAITING_FOR_TASK,
        deferral_order=0,
    )
    movement = poll_movement(flow.session, replace(record, task_id="job-1"))
    assert movement.step is PollToolTask
    assert movement.input == "task-1"
    options = movement.options
    assert options is not None
    assert _is_sync(options)
    assert options.execute_retry.maximum_attempts == 3
    assert list(options.execute_lock_attributes) == []
    assert options._execute_failure_target is route_target
    assert [load.instance for load in options.execute_load_attribute_map_instances] == ["task-1"]


def test_cancel_tool_task_has_30_seconds_and_3_attempts_within_2_minutes(flow: Any) -> None:
    from dex_agents.session._tool_tasks import CancelToolTask, cancel_task_movement

    movement = cancel_task_movement(flow.session, "task-1")
    assert movement.step is CancelToolTask
    options = movement.options
    assert options is not None
    assert _is_sync(options)
    assert options.execute_method_timeout == timedelta(seconds=30)
    assert options.execute_retry.maximum_attempts == 3
    assert options.execute_retry.total_duration == timedelta(minutes=2)
    assert options._execute_failure_target is RecordToolOutcomeUnknown
