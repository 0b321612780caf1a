"""``planning_tool_choice="required"``: which models refuse a forced tool choice, the
check when a Stepwise definition is built, and the check of a model chosen per session."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.models import AnthropicModelClient, ModelRequest, ModelSettings
from dex_agents.runner import check_planning_tool_choice, forced_tool_choice_refusal
from dex_agents.stepwise import AgentDefinition, StepwiseRunner
from dex_agents.testing import (
    RunnerDriver,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.values import InteractionMode

THINKING = ModelSettings(provider_options={"thinking": {"type": "enabled", "budget_tokens": 2048}})


@pytest.mark.parametrize(
    ("model", "thinking", "refused"),
    [
        ("claude-opus-5-5", False, True),
        ("claude-sonnet-5-5-20261001", False, True),
        ("anthropic:claude-sonnet-5.5", False, True),
        ("anthropic/claude-opus-5-5@latest", False, True),
        ("us.anthropic.claude-opus-5-5-v1:0", False, True),
        ("bedrock/anthropic.claude-sonnet-5-5-20261001-v1:0", False, True),
        ("claude-opus-5-5:thinking", False, True),
        ("myclaude-opus-5-5", False, False),
        ("claude-sonnet-4-5", False, False),
        ("claude-sonnet-5-50", False, False),
        ("gpt-5-mini", False, False),
        ("claude-sonnet-4-5", True, True),
        (None, False, False),
    ],
)
def test_which_models_refuse_a_forced_tool_choice(
    model: str | None, thinking: bool, refused: bool
) -> None:
    refusal = forced_tool_choice_refusal(model, extended_thinking=thinking)
    assert (refusal is not None) == refused, refusal


def test_the_check_names_the_place_the_reason_and_what_to_do_instead() -> None:
    check_planning_tool_choice("auto", "model x refuses a forced tool choice", where="agent a")
    check_planning_tool_choice("required", None, where="agent a")
    with pytest.raises(ValueError, match="must be 'auto' or 'required'"):
        check_planning_tool_choice("always", None, where="agent a")
    with pytest.raises(ValueError) as refused:
        check_planning_tool_choice("required", "model x refuses one", where="agent a")
    message = str(refused.value)
    assert message.startswith("agent a: planning_tool_choice='required'")
    assert "model x refuses one" in message
    assert "planning_tool_choice='auto'" in message


def _definition(**values: Any) -> AgentDefinition:
    return AgentDefinition(
        **{
            "name": "planner",
            "instructions": "Plan.",
            "built_in_tools": ("write_todos",),
            "plan_mode_enabled": True,
            "planning_tool_choice": "required",
            **values,
        }
    )


def test_a_definition_refuses_required_for_a_model_that_refuses_a_forced_tool_choice() -> None:
    with pytest.raises(ValueError, match="model claude-sonnet-5-5 refuses a forced tool choice"):
        _definition(model=AnthropicModelClient("claude-sonnet-5-5"))
    with pytest.raises(ValueError, match="extended thinking"):
        _definition(model=AnthropicModelClient("claude-sonnet-4-5"), model_settings=THINKING)
    # Models that take one, "auto", and a definition without plan mode are fine.
    _definition(model=AnthropicModelClient("claude-sonnet-4-5"))
    _definition(model=AnthropicModelClient("claude-sonnet-5-5"), planning_tool_choice="auto")
    _definition(model=AnthropicModelClient("claude-sonnet-5-5"), plan_mode_enabled=False)
    _definition(model=ScriptedModelClient(lambda request: "ok"))


def _planner(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(
        tool_calls=[
            ScriptedToolCall("write_todos", {"todos": [{"content": "a", "status": "pending"}]})
        ]
    )


async def test_a_model_chosen_per_session_is_checked_when_a_turn_forces_the_call() -> None:
    takes = ScriptedModelClient(_planner)
    refuses = AnthropicModelClient("claude-opus-5-5")
    models: dict[str, Any] = {"takes": takes, "refuses": refuses}
    definition = _definition(
        model=takes, resolve_model=lambda settings: models[str(settings.get("model", "takes"))]
    )
    driver = RunnerDriver(StepwiseRunner(definition), built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.session_settings = {"model": "refuses"}
    driver.start_turn("plan it")
    with pytest.raises(ValueError, match="the model resolve_model chose: planning_tool_choice"):
        await driver.run_model()

    driver.session_settings = {"model": "takes"}
    await driver.run_model()
    assert takes.requests[-1].tool_choice == "required"
