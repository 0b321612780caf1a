"""dex_agents.testing._runner_driver: the engine-free stand-in adapters drive their runners with."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dex_agents import AgentToolCallStatus, AgentUsage, ToolEffect, ToolPolicy
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import RunnerDriver
from dex_agents.values import FrameworkMessage


class EchoRunner:
    """Asks for two calls on the turn's first model call, then answers with what it got."""

    def __init__(self) -> None:
        self.contexts: list[AgentTurnContext] = []
        self.executions: list[DeferredToolExecution] = []

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", text=text, framework_item=json.dumps({"user": text}))

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted | ToolCallsRequested:
        self.contexts.append(turn)
        turn.events.write_text_delta(f"thinking in {turn.turn_id}")
        if not turn.is_resuming:
            calls = [
                DeferredToolCall("a", "lookup", "{}", turn.resolve_tool_policy("lookup")),
                DeferredToolCall("b", "refund", "{}", turn.resolve_tool_policy("refund")),
            ]
            return ToolCallsRequested(
                framework_run_state="waiting",
                tool_calls=calls,
                usage=AgentUsage(model_calls=1),
                new_messages=[FrameworkMessage(role="assistant", framework_item='{"calls": 2}')],
            )
        answers = [describe_tool_call_outcome(r) for r in turn.tool_calls]
        return TurnCompleted(
            new_messages=[
                FrameworkMessage(
                    role="assistant", text="; ".join(answers), framework_item=json.dumps(answers)
                )
            ],
            usage=AgentUsage(model_calls=1),
        )

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution
    ) -> ToolExecutionResult | ToolInputRequested:
        self.executions.append(call)
        if call.tool_call.tool_name == "refund":
            raise ToolExecutionError("refunds are closed")
        if call.tool_call.tool_name == "ask":
            return ToolInputRequested("which one?")
        return ToolExecutionResult(f"looked up with {call.idempotency_key}")


async def test_a_turn_runs_from_committed_state_only() -> None:
    runner = EchoRunner()
    driver = RunnerDriver(runner, policies={"lookup": ToolPolicy(ToolEffect.READ)})
    driver.start_turn("hi")

    first = await driver.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert [r.status for r in driver.records] == [AgentToolCallStatus.APPROVED] * 2
    assert driver.record("a").effect is ToolEffect.READ
    assert driver.record("b").requires_approval  # unclassified by default
    assert driver.run_state == "waiting"

    await driver.run_tools()
    assert driver.record("a").output == "looked up with s-1/turn-1/a"
    assert (driver.record("b").status, driver.record("b").error) == (
        AgentToolCallStatus.FAILED,
        "refunds are closed",
    )

    done = await driver.run_model()
    assert isinstance(done, TurnCompleted)
    assert runner.contexts[1].is_resuming
    assert [m.sequence for m in driver.messages] == [1, 2, 3]
    assert driver.items()[0] == {"user": "hi"}
    assert driver.run_state is None
    assert driver.events.text == ["thinking in turn-1", "thinking in turn-1"]

    driver.start_turn("again")
    assert driver.records == []
    second_turn = driver.context(attempt=2)
    assert (second_turn.turn_id, second_turn.attempt, second_turn.is_resuming) == (
        "turn-2",
        2,
        False,
    )


async def test_decided_records_and_rejections_skip_the_tool() -> None:
    runner = EchoRunner()
    driver = RunnerDriver(runner, default_effect=ToolEffect.READ, flow_id="f-9")
    driver.start_turn("hi")
    await driver.run_model()
    driver.reject("b", "not today")

    await driver.run_tools()

    assert [e.tool_call.tool_call_id for e in runner.executions] == ["a"]
    assert runner.executions[0].idempotency_key == "f-9/turn-1/a"
    assert driver.record("b").rejection_message == "not today"
    assert driver.context().tool_policies == {}
    assert driver.context().resolve_tool_policy("x") == ResolvedToolPolicy(ToolEffect.READ, False)


async def test_a_tool_that_asks_for_input_is_not_recorded_as_a_result() -> None:
    runner = EchoRunner()
    driver = RunnerDriver(runner)
    driver.start_turn("hi")
    await driver.run_model()
    driver.records = [
        replace(r, tool_name="ask") if r.tool_call_id == "a" else r for r in driver.records
    ]

    with pytest.raises(AssertionError, match="asked for input"):
        await driver.run_tools()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="flow_id"):
        RunnerDriver(EchoRunner(), flow_id="a/b")
    driver = RunnerDriver(EchoRunner())
    with pytest.raises(KeyError, match="no record of tool call 'x'"):
        driver.record("x")
