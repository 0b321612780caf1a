"""Stepwise in the shape of every runner: its names, its tool declaration, the old names."""

from __future__ import annotations

import pytest

import dex_agents.stepwise as stepwise
from dex_agents import ToolEffect
from dex_agents.models import ScriptedModelClient
from dex_agents.stepwise import (
    AgentDefinition,
    StepwiseRunner,
    create_stepwise_session_flow,
    declare_tool_effect,
    function_tool,
)


def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


def test_declare_tool_effect_returns_a_declared_copy() -> None:
    tool = function_tool(lookup)
    declared = declare_tool_effect(tool, "read")
    assert (declared.effect, declared.requires_approval) == (ToolEffect.READ, None)
    assert tool.effect is None, "the tool itself is unchanged"
    approving = declare_tool_effect(tool, ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    assert (approving.effect, approving.requires_approval) == (ToolEffect.IDEMPOTENT_WRITE, True)
    with pytest.raises(ValueError, match="sometimes"):
        declare_tool_effect(tool, "sometimes")
    with pytest.raises(TypeError, match="FunctionTool"):
        declare_tool_effect(lookup, "read")  # type: ignore[arg-type]


def test_the_old_names_warn_and_still_work() -> None:
    definition = AgentDefinition(
        name="a", instructions="Answer.", model=ScriptedModelClient(lambda request: "hi")
    )
    with pytest.warns(DeprecationWarning, match="StepwiseRunner"):
        assert stepwise.StepwiseAgentRunner is StepwiseRunner  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.warns(DeprecationWarning, match="create_stepwise_session_flow"):
        old = stepwise.create_stepwise_agent_session_flow  # pyright: ignore[reportAttributeAccessIssue]
    assert old(definition, "Old").get_flow_type() == "Old"
    assert create_stepwise_session_flow(definition, "New").get_flow_type() == "New"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        stepwise.nothing  # pyright: ignore[reportAttributeAccessIssue]  # noqa: B018
