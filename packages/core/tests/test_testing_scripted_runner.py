"""The scripted runner plays a neutral model script statelessly; scenario tools act as described."""

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
)
from dex_agents.testing import (
    ALWAYS,
    MODEL_CALLS_LOG,
    TOOL_RUNS_LOG,
    InvocationLog,
    ModelScript,
    ModelTurn,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ScriptedRunner,
    ToolBehaviour,
    ToolCallSpec,
    record_model_call,
    run_scenario_tool,
)
from dex_agents.values import (
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    ToolEffect,
)


class RecordingEvents:
    """Collects what the runner writes; the session's writer is tested with the session."""

    def __init__(self) -> None:
        self.deltas: list[str] = []

    @property
    def turn_id(self) -> str:
        return "turn-1"

    @property
    def attempt(self) -> int:
        return 1

    def write_text_delta(self, text: str) -> None:
        self.deltas.append(text)

    def write_reasoning_delta(self, text: str) -> None:
        raise AssertionError("the scripted model writes no reasoning")

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        raise AssertionError("not a tool Step")

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: AgentToolCallStatus
    ) -> None:
        raise AssertionError("not a tool Step")

    def write_event(self, type: str, payload: Mapping[str, Any]) -> None:
        raise AssertionError("no custom events")


class NeverCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _no_heartbeat() -> None:
    return None


async def _no_checkpoint(text: str) -> None:
    return None


LOOKUP = ScenarioTool("lookup_order", ToolEffect.READ, text="order {order_id} shipped")
CHARGE = ScenarioTool("charge_card", ToolEffect.NON_IDEMPOTENT_WRITE, text="charged")
SCRIPT = ModelScript(
    [
        ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]),
        ModelTurn(text_from_tool_results=True),
        ModelTurn(text="plain answer"),
    ]
)


def _context(
    runner: ScriptedRunner,
    *,
    turn_id: str = "turn-1",
    run_state: str | None = None,
    records: tuple[AgentToolCall, ...] = (),
    attempt: int = 1,
    events: RecordingEvents | None = None,
) -> AgentTurnContext:
    user = runner.build_user_message("where is order 42?")
    return AgentTurnContext(
        flow_id="session-1",
        turn_id=turn_id,
        attempt=attempt,
        messages=[AgentMessage.from_framework_message(user, sequence=1, turn_id=turn_id)],
        framework_run_state=run_state,
        tool_calls=records,
        events=events or RecordingEvents(),
        cancellation=NeverCancelled(),
        deadline=datetime.now(UTC),
        step_execution_id="RunModel-1",
        tool_policies={},
        default_tool_effect=ToolEffect.UNCLASSIFIED,
        heartbeat=_no_heartbeat,
    )


def _record(call_id: str, status: AgentToolCallStatus, output: str | None) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name="lookup_order",
        arguments='{"order_id": "42"}',
        effect=ToolEffect.READ,
        requires_approval=False,
        status=status,
        deferral_order=0,
        output=output,
    )


def test_script_groups_responses_into_user_turns() -> None:
    turns = SCRIPT.user_turns()
    assert [len(turn) for turn in turns] == [2, 1]
    assert SCRIPT.response_for(2, 0).text == "plain answer"
    with pytest.raises(LookupError, match="no turn-3"):
        SCRIPT.response_for(3, 0)
    with pytest.raises(LookupError, match="no response 3"):
        SCRIPT.response_for(1, 2)
    failing = ModelScript([ModelTurn(text="x", fail_attempts=ALWAYS), ModelTurn(text="y")])
    assert [len(turn) for turn in failing.user_turns()] == [1, 1]


def test_bad_scripts_and_tools_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one response"):
        ModelScript([])
    with pytest.raises(ValueError, match="not both"):
        ModelTurn(text="x", tool_calls=[ToolCallSpec("t")])
    with pytest.raises(ValueError, match="contain no '/'"):
        ToolCallSpec("t", tool_call_id="a/b")
    with pytest.raises(ValueError, match="name must use only"):
        ScenarioTool("t", ToolEffect.READ, gate="../x")
    with pytest.raises(ValueError, match="unique"):
        ScriptedRunner(SCRIPT, [LOOKUP, LOOKUP], Path("."))


async def test_a_read_tool_turn_asks_then_answers_from_the_recorded_result(
    tmp_path: Path,
) -> None:
    runner = ScriptedRunner(SCRIPT, [LOOKUP], tmp_path)
    first = await runner.run_model_step(_context(runner))
    assert isinstance(first, ToolCallsRequested)
    [call] = first.tool_calls
    assert (call.tool_call_id, call.tool_name) == ("call-0-0", "lookup_order")
    assert json.loads(call.arguments) == {"order_id": "42"}
    assert call.policy.effect is ToolEffect.READ
    assert call.policy.requires_approval is False

    events = RecordingEvents()
    record = _record("call-0-0", AgentToolCallStatus.SUCCEEDED, "order 42 shipped")
    second = await runner.run_model_step(
        _context(runner, run_state=first.framework_run_state, records=(record,), events=events)
    )
    assert isinstance(second, TurnCompleted)
    assert [m.role for m in second.new_messages] == ["assistant", "tool", "assistant"]
    assert second.new_messages[1].tool_output == "order 42 shipped"
    assert second.new_messages[-1].text == "lookup_order: order 42 shipped"
    assert events.deltas == ["lookup_order: order 42 shipped"]

    calls = InvocationLog(tmp_path / MODEL_CALLS_LOG).invocations()
    assert [c.details["position"] for c in calls] == [0, 1]
    assert calls[1].details["tool_results"] == {"call-0-0": "order 42 shipped"}
    assert calls[0].details["history"] == ["user: where is order 42?"]


async def test_a_rejected_call_reaches_the_model_as_its_rejection_message(tmp_path: Path) -> None:
    runner = ScriptedRunner(SCRIPT, [LOOKUP], tmp_path)
    first = await runner.run_model_step(_context(runner))
    assert isinstance(first, ToolCallsRequested)
    record = replace(
        _record("call-0-0", AgentToolCallStatus.REJECTED, None), rejection_message="not now"
    )
    second = await runner.run_model_step(
        _context(runner, run_state=first.framework_run_state, records=(record,))
    )
    assert isinstance(second, TurnCompleted)
    assert second.new_messages[-1].text == "lookup_order: not now"


async def test_failing_attempts_raise_and_a_later_attempt_answers(tmp_path: Path) -> None:
    script = ModelScript([ModelTurn(text="hello", fail_attempts=1)])
    runner = ScriptedRunner(script, [], tmp_path)
    with pytest.raises(RuntimeError, match="failed on attempt 1"):
        await runner.run_model_step(_context(runner, attempt=1))
    answer = await runner.run_model_step(_context(runner, attempt=2))
    assert isinstance(answer, TurnCompleted)
    assert answer.new_messages[-1].text == "hello"


async def test_second_user_turn_plays_the_next_part_of_the_script(tmp_path: Path) -> None:
    runner = ScriptedRunner(SCRIPT, [LOOKUP], tmp_path)
    answer = await runner.run_model_step(_context(runner, turn_id="turn-2"))
    assert isinstance(answer, TurnCompleted)
    assert answer.new_messages[-1].text == "plain answer"


def _execution(tmp_path: Path, tool_name: str, attempt: int = 1) -> DeferredToolExecution:
    record = replace(_record("call-0-0", AgentToolCallStatus.APPROVED, None), tool_name=tool_name)
    return DeferredToolExecution(
        flow_id="session-1",
        tool_call=record,
        idempotency_key="session-1/turn-1/call-0-0",
        attempt=attempt,
        events=RecordingEvents(),
        cancellation=NeverCancelled(),
        deadline=datetime.now(UTC),
        heartbeat=_no_heartbeat,
        heartbeat_checkpoint=None,
        save_heartbeat_checkpoint=_no_checkpoint,
    )


async def test_scenario_tools_return_raise_and_log_every_run(tmp_path: Path) -> None:
    tools = [
        LOOKUP,
        ScenarioTool(
            "refund",
            ToolEffect.IDEMPOTENT_WRITE,
            behaviour=ToolBehaviour.RAISES_TOOL_ERROR,
            text="no such order",
        ),
        ScenarioTool(
            "flaky", ToolEffect.READ, behaviour=ToolBehaviour.RAISES_UNEXPECTED, text="boom"
        ),
        ScenarioTool("retry_once", ToolEffect.READ, text="fine", fail_attempts=1),
    ]
    runner = ScriptedRunner(SCRIPT, tools, tmp_path)
    assert await runner.execute_deferred_tool_call(
        _execution(tmp_path, "lookup_order")
    ) == ToolExecutionResult("order 42 shipped")
    with pytest.raises(ToolExecutionError, match="no such order"):
        await runner.execute_deferred_tool_call(_execution(tmp_path, "refund"))
    with pytest.raises(RuntimeError, match="boom"):
        await runner.execute_deferred_tool_call(_execution(tmp_path, "flaky"))
    with pytest.raises(RuntimeError, match="failed on attempt 1"):
        await runner.execute_deferred_tool_call(_execution(tmp_path, "retry_once", 1))
    assert await runner.execute_deferred_tool_call(
        _execution(tmp_path, "retry_once", 2)
    ) == ToolExecutionResult("fine")
    with pytest.raises(ToolExecutionError, match="unknown tool"):
        await runner.execute_deferred_tool_call(_execution(tmp_path, "missing"))
    runs = InvocationLog(tmp_path / TOOL_RUNS_LOG)
    assert runs.count("retry_once") == 2
    assert runs.invocations("lookup_order")[0].idempotency_key == "session-1/turn-1/call-0-0"


def test_scenarios_round_trip_through_the_state_directory(tmp_path: Path) -> None:
    scenario = Scenario(
        script=ModelScript(
            [
                ModelTurn(
                    tool_calls=[ToolCallSpec("charge_card", {"amount": 5}, tool_call_id="c1")]
                ),
                ModelTurn(text="done", gate="model", text_before_gate="thinking"),
            ]
        ),
        tools=[CHARGE, replace(LOOKUP, gate="lookup", requires_approval=True)],
        session=ScenarioSession(
            "ConformanceFlow", interrupt_deadline=None, question_supersedes_later_calls=True
        ),
    )
    scenario.write(tmp_path)
    assert Scenario.read(tmp_path) == scenario


async def test_a_scenario_tool_with_a_question_asks_first_and_runs_with_the_answer(
    tmp_path: Path,
) -> None:
    paint = ScenarioTool(
        "paint", ToolEffect.IDEMPOTENT_WRITE, text="painted {answer}", question="Which colour?"
    )
    runner = ScriptedRunner(SCRIPT, [paint], tmp_path)
    asked = await runner.execute_deferred_tool_call(_execution(tmp_path, "paint"))
    assert asked == ToolInputRequested("Which colour?")
    runs = InvocationLog(tmp_path / TOOL_RUNS_LOG)
    assert runs.count("paint") == 0, "a question comes before any effect"
    answered = replace(_execution(tmp_path, "paint"), input_answers=("red", "blue"))
    assert await runner.execute_deferred_tool_call(answered) == ToolExecutionResult("painted blue")
    assert runs.invocations("paint")[0].details["input_answers"] == ["red", "blue"]
    with pytest.raises(TypeError, match="scenario_tool_outcome"):
        await run_scenario_tool(
            paint, "{}", state_directory=tmp_path, idempotency_key=None, attempt=1
        )
    assert Scenario.from_json(
        Scenario(SCRIPT, [paint], ScenarioSession("Flow")).to_json()
    ).tools == (paint,)


async def test_the_scripted_runner_declares_each_tools_effect_and_approval(
    tmp_path: Path,
) -> None:
    """Its declaration reaches the call's policy; a session ToolPolicy would win over it."""
    quiet_charge = ScenarioTool(
        "lookup_order", ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
    )
    runner = ScriptedRunner(SCRIPT, [quiet_charge], tmp_path)
    requested = await runner.run_model_step(_context(runner))
    assert isinstance(requested, ToolCallsRequested)
    assert requested.tool_calls[0].policy == ResolvedToolPolicy(
        ToolEffect.NON_IDEMPOTENT_WRITE, False
    )


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"position": -1}, "position="),
        ({"attempt": 0}, "attempt="),
        ({"history": "user: hi"}, "history="),
        ({"tool_results": [("call-0-0", "ok")]}, "tool_results="),
    ],
)
def test_record_model_call_names_the_keyword_given_the_wrong_value(
    tmp_path: Path, keywords: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {
        "turn_id": "turn-1",
        "position": 0,
        "attempt": 1,
        "history": [],
        "tool_results": {},
        **keywords,
    }
    with pytest.raises(TypeError, match=message):
        record_model_call(tmp_path, **arguments)
    assert not (tmp_path / MODEL_CALLS_LOG).exists()
