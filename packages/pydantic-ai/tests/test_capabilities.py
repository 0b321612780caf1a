"""The 0.2.0 capabilities on the Pydantic AI runner: a tool that asks the user
(``ask_user``, or Pydantic AI's own ``CallDeferred(kind="question")``), plan mode, and
the model chosen per session."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ModelRequest, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from test_runner import ScriptedModel, answer, calls

from dex_agents.runner import (
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    build_plan_note,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import AgentPlan, AgentToolCallStatus, InteractionMode, PlanTask, ToolEffect
from dex_agents_pydantic_ai import PydanticAIRunner, ask_user, dex_tool_metadata

painted: list[tuple[str, str, str]] = []


@dataclass
class _OwnCapability(AbstractCapability[Any]):
    """A capability of the agent's own: its tool Steps go through an agent run."""


def _painter(script: ScriptedModel, *, own_capability: bool = False) -> Agent[None, str]:
    agent = Agent(script.model(), capabilities=[_OwnCapability()] if own_capability else None)

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.IDEMPOTENT_WRITE))
    def paint_fence(side: str) -> str:
        """Paint one side of the fence in the colour and on the day the user picks."""
        colour = ask_user("Which colour?", choices=["red", "blue"], continuation="colour")
        day = ask_user("Which day?")
        painted.append((side, colour, day))
        return f"painted {side} {colour} on {day}"

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def pick_size() -> str:
        """Asks with Pydantic AI's own question deferral."""
        raise CallDeferred(
            metadata={"question": "Which size?", "choices": ["S", "M"]}, kind="question"
        )

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def bad_question() -> str:
        """Asks without a question."""
        raise CallDeferred(metadata={"prompt": "size?"}, kind="question")

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def external() -> str:
        """Defers its own call for external work, which a session tool call cannot wait for."""
        raise CallDeferred()

    return agent


@pytest.mark.parametrize("own_capability", [False, True], ids=["direct", "agent-run"])
async def test_a_tool_asks_and_each_rerun_returns_the_answers_in_order(
    own_capability: bool,
) -> None:
    painted.clear()
    script = ScriptedModel(calls(ToolCallPart("paint_fence", {"side": "north"}, "c1")))
    driver = RunnerDriver(PydanticAIRunner(_painter(script, own_capability=own_capability)))
    driver.start_turn("paint the north side")
    assert isinstance(await driver.run_model(), ToolCallsRequested)
    record = driver.record("c1")
    runner = driver.runner

    first = await runner.execute_deferred_tool_call(driver.execution(record))
    assert first == ToolInputRequested(
        "Which colour?", choices=("red", "blue"), continuation="colour"
    )
    asked = replace(record, input_continuation="colour")
    second = await runner.execute_deferred_tool_call(driver.execution(asked, input_answers=["red"]))
    assert second == ToolInputRequested("Which day?")
    assert painted == [], "the tool asks before any effect"
    done = await runner.execute_deferred_tool_call(
        driver.execution(record, input_answers=["red", "tuesday"])
    )
    assert done == ToolExecutionResult("painted north red on tuesday")
    assert painted == [("north", "red", "tuesday")]


@pytest.mark.parametrize("own_capability", [False, True], ids=["direct", "agent-run"])
async def test_pydantic_ais_own_question_deferral_asks_the_user(own_capability: bool) -> None:
    script = ScriptedModel(
        calls(
            ToolCallPart("pick_size", {}, "c1"),
            ToolCallPart("bad_question", {}, "c2"),
            ToolCallPart("external", {}, "c3"),
        )
    )
    driver = RunnerDriver(PydanticAIRunner(_painter(script, own_capability=own_capability)))
    driver.start_turn("pick a size")
    await driver.run_model()
    runner = driver.runner
    asked = await runner.execute_deferred_tool_call(driver.execution(driver.record("c1")))
    assert asked == ToolInputRequested("Which size?", choices=("S", "M"))
    with pytest.raises(TypeError, match="give 'question'"):
        await runner.execute_deferred_tool_call(driver.execution(driver.record("c2")))
    with pytest.raises(ToolExecutionError, match="deferred its own call"):
        await runner.execute_deferred_tool_call(driver.execution(driver.record("c3")))


def test_ask_user_outside_a_session_tool_call_says_so() -> None:
    with pytest.raises(LookupError):
        ask_user("Which colour?")


# --- plan mode ---------------------------------------------------------------------


def _todos(status: str = "pending") -> dict[str, Any]:
    return {"todos": [{"content": "look up order 4", "status": status}]}


async def test_a_planning_turn_offers_only_write_todos_forced_on_its_first_request() -> None:
    script = ScriptedModel(
        calls(ToolCallPart("write_todos", _todos(), "p-1")),
        answer("plan ready"),
        calls(ToolCallPart("write_todos", _todos(), "p-2")),
        answer("running"),
    )
    agent = _painter(script)
    runner = PydanticAIRunner(agent, planning_tool_choice="required")
    assert runner.supports_plan_mode
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan order 4")
    assert isinstance(await driver.run_model(), ToolCallsRequested)
    driver.finish("p-1", AgentToolCallStatus.SUCCEEDED, output="draft")
    draft = AgentPlan(revision=1, status="draft", tasks=(PlanTask("look up order 4", "pending"),))
    driver.plan = draft
    await driver.run_model()
    # Feedback on the draft plans again, without forcing a tool call.
    driver.start_turn("order 4, please")
    await driver.run_model()
    driver.interaction_mode = InteractionMode.EXECUTING
    driver.start_turn("go")
    await driver.run_model()

    offered = [sorted(tool.name for tool in info.function_tools) for _, info in script.calls]
    everything = sorted(["bad_question", "external", "paint_fence", "pick_size", "write_todos"])
    assert offered == [["write_todos"]] * 3 + [everything]
    choices = [(info.model_settings or {}).get("tool_choice") for _, info in script.calls]
    assert choices == [["write_todos"], None, None, None]
    # The plan note comes right before the turn's messages in every request with a plan.
    feedback, _ = script.calls[2]
    note = build_plan_note(draft, InteractionMode.PLANNING)
    prompts = [
        part.content
        for message in feedback
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
    assert prompts == ["plan order 4", note, "order 4, please"]


def _echo(name: str) -> FunctionModel:
    return FunctionModel(lambda messages, info: answer(f"{name} answer"), model_name=name)


def test_required_is_refused_for_a_model_that_refuses_a_forced_tool_choice() -> None:
    with pytest.raises(ValueError, match="claude-opus-5-5 refuses a forced tool choice"):
        PydanticAIRunner(Agent(_echo("claude-opus-5-5")), planning_tool_choice="required")
    thinking = Agent(
        _echo("claude-sonnet-4-5"),
        model_settings={"anthropic_thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    with pytest.raises(ValueError, match="extended thinking"):
        PydanticAIRunner(thinking, planning_tool_choice="required")
    # Thinking on another provider's model, and "auto", are fine.
    PydanticAIRunner(
        Agent(_echo("gpt-5"), model_settings={"thinking": "high"}), planning_tool_choice="required"
    )
    PydanticAIRunner(Agent(_echo("claude-opus-5-5")), planning_tool_choice="auto")


# --- the model chosen per session --------------------------------------------------


async def test_resolve_model_chooses_the_model_of_every_request_and_of_summaries() -> None:
    models = {"small": _echo("small"), "large": _echo("large")}
    runner = PydanticAIRunner(
        Agent(models["small"]), resolve_model=lambda s: models[str(s.get("model", "small"))]
    )
    driver = RunnerDriver(runner)
    driver.session_settings = {"model": "large"}
    await driver.run_text_turns("hello")
    driver.session_settings = {}
    await driver.run_text_turns("again")
    assert [m.text for m in driver.messages if m.role == "assistant"] == [
        "large answer",
        "small answer",
    ]
    driver.session_settings = {"model": "large"}
    summary = await runner.summarize_context(summary_request(driver.context()))
    assert summary.summary == "large answer"
    assert summary.model_call_metadata is not None
    assert summary.model_call_metadata.request_model == "large"


async def test_a_resolved_model_that_refuses_a_forced_tool_choice_fails_the_planning_request() -> (
    None
):
    runner = PydanticAIRunner(
        Agent(_echo("small")),
        resolve_model=lambda settings: _echo("claude-sonnet-5-5"),
        planning_tool_choice="required",
    )
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan")
    with pytest.raises(ValueError, match="the model resolve_model chose"):
        await driver.run_model()
