"""Plan mode, forced tool choice, a model per session and a tool's own question, on the
runner driven directly with the SDK's own ScriptedModel."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.shared import Reasoning

from dex_agents import AgentToolCallStatus, ToolEffect
from dex_agents.runner import (
    PLANNING_TURN_TOOL_REJECTED,
    ContextSummaryRequest,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver
from dex_agents.values import AgentPlan, InteractionMode, PlanTask
from dex_agents_openai_agents import (
    OpenAIAgentsRunner,
    create_openai_agents_session_flow,
    declare_tool_effect,
)

TODOS = {"todos": [{"content": "look up order 4", "status": "pending"}]}


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


declare_tool_effect(lookup_order, ToolEffect.READ)


def agent_with(model: ScriptedModel | str, *tools: Any, **fields: Any) -> Agent[Any]:
    return Agent(name="support", instructions="Help.", model=model, tools=list(tools), **fields)


def offered(model: ScriptedModel, call: int) -> list[str]:
    calls: list[ModelCall] = list(model.calls)
    return [getattr(tool, "name", "?") for tool in calls[call].tools]


# --- plan mode ------------------------------------------------------------------------


async def test_a_planning_turn_offers_only_write_todos_and_hands_other_calls_to_the_session() -> (
    None
):
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("lookup_order", {"order_id": "4"}, call_id="c1"),
                    function_call("write_todos", TODOS, call_id="c2"),
                ]
            ),
            ModelStep(output=[assistant_message("here is the plan")]),
        ]
    )
    driver = RunnerDriver(
        OpenAIAgentsRunner(agent_with(model, lookup_order)),
        built_ins=("ask_user", "write_todos"),
    )
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan order 4")

    requested = await driver.run_model()

    assert isinstance(requested, ToolCallsRequested), "the model call did not fail"
    assert offered(model, 0) == ["write_todos"], "a planning turn offers only write_todos"
    assert model.calls[0].handoffs == []
    assert [(c.tool_call_id, c.tool_name) for c in requested.tool_calls] == [
        ("c1", "lookup_order"),
        ("c2", "write_todos"),
    ]
    assert requested.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)
    assert len(model.calls) == 1, "the rerun of the step made no model call"
    # The session rejects the other call and records write_todos in RunModel.
    driver.reject("c1", PLANNING_TURN_TOOL_REJECTED)
    driver.finish("c2", AgentToolCallStatus.SUCCEEDED, output='{"status":"updated"}')

    final = await driver.run_model()

    assert isinstance(final, TurnCompleted)
    assert offered(model, 1) == ["write_todos"], "the hidden stub is never offered"
    outputs = {
        item["call_id"]: item["output"]
        for item in list(model.calls)[1].input
        if item.get("type") == "function_call_output"
    }
    assert outputs == {"c1": PLANNING_TURN_TOOL_REJECTED, "c2": '{"status":"updated"}'}


async def test_a_call_of_a_tool_the_agent_lacks_gets_the_session_default_and_fails() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    assistant_message("Cancelling it."),
                    function_call("cancel_subscription", {"plan": "pro"}, call_id="c1"),
                ]
            ),
            ModelStep(output=[assistant_message("could not cancel")]),
        ]
    )
    driver = RunnerDriver(OpenAIAgentsRunner(agent_with(model, lookup_order)))
    driver.start_turn("cancel my subscription")

    requested = await driver.run_model()

    assert isinstance(requested, ToolCallsRequested)
    [call] = requested.tool_calls
    assert (call.tool_name, call.policy) == (
        "cancel_subscription",
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=True),
    )
    assert "".join(driver.events.text) == "Cancelling it.", "the rerun writes no deltas again"
    assert len(model.calls) == 1
    [record] = driver.records
    with pytest.raises(ToolExecutionError, match="cancel_subscription"):
        await driver.runner.execute_deferred_tool_call(driver.execution(record))
    driver.finish("c1", AgentToolCallStatus.FAILED, error="unknown tool cancel_subscription")

    final = await driver.run_model()

    assert isinstance(final, TurnCompleted)
    assert offered(model, 1) == ["lookup_order"]
    assert model.calls[1].input[-1]["call_id"] == "c1"
    assert "cancel_subscription" in model.calls[1].input[-1]["output"]


async def test_required_forces_the_first_planning_call_only_while_no_draft_exists() -> None:
    steps = [
        ModelStep(output=[function_call("write_todos", TODOS, call_id="c1")]),
        ModelStep(output=[assistant_message("planned")]),
        ModelStep(output=[assistant_message("revised")]),
    ]
    model = ScriptedModel(steps)
    runner = OpenAIAgentsRunner(agent_with(model), planning_tool_choice="required")
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan it")
    await driver.run_model()
    driver.finish("c1", AgentToolCallStatus.SUCCEEDED, output='{"status":"updated"}')
    await driver.run_model()
    driver.plan = AgentPlan(1, "draft", (PlanTask("look up order 4", "pending"),))
    driver.start_turn("change step one")
    await driver.run_model()

    assert [call.model_settings.tool_choice for call in model.calls] == ["required", None, None]


async def test_auto_never_forces_a_tool_choice() -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message("what should I plan?")])])
    driver = RunnerDriver(OpenAIAgentsRunner(agent_with(model)), built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan it")
    await driver.run_model()
    assert model.calls[0].model_settings.tool_choice is None


@pytest.mark.parametrize(
    ("model", "settings", "reason"),
    [
        ("litellm/anthropic/claude-opus-5-5", ModelSettings(), "claude-opus-5-5"),
        ("litellm/anthropic/claude-sonnet-5-5-20260901", ModelSettings(), "claude-sonnet-5-5"),
        (
            "litellm/anthropic/claude-sonnet-4-5",
            ModelSettings(extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}}),
            "extended thinking",
        ),
        (
            "litellm/anthropic/claude-sonnet-4-5",
            ModelSettings(reasoning=Reasoning(effort="high")),
            "extended thinking",
        ),
    ],
)
def test_required_with_a_model_that_refuses_a_forced_tool_choice_fails_at_build_time(
    model: str, settings: ModelSettings, reason: str
) -> None:
    agent = agent_with(model, model_settings=settings)
    with pytest.raises(ValueError, match=reason):
        create_openai_agents_session_flow(agent, "Planner", planning_tool_choice="required")
    with pytest.raises(ValueError, match="planning_tool_choice='auto'"):
        OpenAIAgentsRunner(
            agent_with("gpt-5"),
            planning_tool_choice="required",
            run_config=RunConfig(model=model, model_settings=settings),
        )
    # "auto" never forces one, and other models take it.
    OpenAIAgentsRunner(agent, planning_tool_choice="auto")
    OpenAIAgentsRunner(
        agent_with("litellm/anthropic/claude-sonnet-4-5"), planning_tool_choice="required"
    )
    OpenAIAgentsRunner(agent_with("gpt-5"), planning_tool_choice="required")


async def test_a_model_resolve_model_chose_is_checked_when_the_call_is_forced() -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message("plan?")])])
    runner = OpenAIAgentsRunner(
        agent_with(model),
        planning_tool_choice="required",
        resolve_model=lambda settings: settings.get("model"),
    )
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.session_settings = {"model": "litellm/anthropic/claude-opus-5-5"}
    driver.start_turn("plan it")
    with pytest.raises(ValueError, match="claude-opus-5-5"):
        await driver.run_model()
    assert not model.calls


# --- a model per session ---------------------------------------------------------------


async def test_resolve_model_chooses_the_model_of_every_call_of_the_turn() -> None:
    default = ScriptedModel([ModelStep(output=[assistant_message("from the default")])])
    fast = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup_order", {"order_id": "4"}, call_id="c1")]),
            ModelStep(output=[assistant_message("from fast")]),
            ModelStep(output=[assistant_message("the summary")]),
        ]
    )
    models = {"fast": fast}
    runner = OpenAIAgentsRunner(
        agent_with(default, lookup_order),
        resolve_model=lambda settings: models.get(str(settings.get("model"))),
    )
    driver = RunnerDriver(runner)
    driver.session_settings = {"model": "fast"}
    driver.start_turn("order 4?")
    await driver.run_model()
    await driver.run_tools()
    final = await driver.run_model()
    assert isinstance(final, TurnCompleted)
    summary = await runner.summarize_context(summary_request(driver, {"model": "fast"}))

    assert summary.summary == "the summary"
    assert (len(fast.calls), len(default.calls)) == (3, 0)
    # Settings naming no model fall back to the agent's own.
    driver.session_settings = {}
    driver.start_turn("hello")
    await driver.run_model()
    assert len(default.calls) == 1


async def test_resolve_model_must_return_a_model() -> None:
    model = ScriptedModel([])
    runner = OpenAIAgentsRunner(agent_with(model), resolve_model=lambda settings: 42)  # type: ignore[arg-type, return-value]  # pyright: ignore[reportArgumentType]
    driver = RunnerDriver(runner)
    driver.start_turn("hello")
    with pytest.raises(TypeError, match="resolve_model must return"):
        await driver.run_model()


def summary_request(
    driver: RunnerDriver[Any], settings: Mapping[str, Any]
) -> ContextSummaryRequest:
    context = driver.context()
    return ContextSummaryRequest(
        flow_id=context.flow_id,
        turn_id=context.turn_id,
        attempt=1,
        messages=context.messages,
        previous_summary=None,
        through_sequence=context.messages[-1].sequence,
        input_token_budget=10_000,
        session_settings=settings,
        events=context.events,
        cancellation=context.cancellation,
        deadline=context.deadline,
        step_execution_id="CompactContext-1",
        heartbeat=context.heartbeat,
    )


# --- a tool's own question --------------------------------------------------------------


@function_tool
def confirm_address(order_id: str) -> ToolInputRequested | str:
    """Ask which address, keyed by the question it asked."""
    execution = get_deferred_tool_execution()
    if not execution.input_answers:
        return ToolInputRequested(
            "Ship to home or office?", choices=("home", "office"), continuation="address-1"
        )
    assert execution.tool_call.input_continuation == "address-1"
    return json.dumps({"order": order_id, "to": execution.input_answers[-1]})


async def test_a_tool_rerun_reads_the_answer_and_the_continuation() -> None:
    model = ScriptedModel(
        [ModelStep(output=[function_call("confirm_address", {"order_id": "9"}, call_id="c1")])]
    )
    driver = RunnerDriver(OpenAIAgentsRunner(agent_with(model, confirm_address)))
    driver.start_turn("ship 9")
    await driver.run_model()
    [record] = driver.records

    asked = await driver.runner.execute_deferred_tool_call(driver.execution(record))

    assert asked == ToolInputRequested(
        "Ship to home or office?", choices=("home", "office"), continuation="address-1"
    )
    rerun = dataclasses.replace(
        driver.execution(dataclasses.replace(record, input_continuation="address-1")),
        input_answers=("office",),
    )
    assert await driver.runner.execute_deferred_tool_call(rerun) == ToolExecutionResult(
        '{"order": "9", "to": "office"}'
    )
