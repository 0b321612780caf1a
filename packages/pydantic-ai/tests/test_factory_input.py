"""Bad input to the public factory and runner is refused with an error that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from dex_agents_pydantic_ai import PydanticAIRunner, create_pydantic_ai_session_flow

AGENT = Agent(TestModel())

BAD_CALLS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "agent": (lambda: create_pydantic_ai_session_flow("agent", "F"), TypeError, "agent"),
    "flow_type": (
        lambda: create_pydantic_ai_session_flow(AGENT, ""),
        ValueError,
        "flow_type",
    ),
    "options": (
        lambda: create_pydantic_ai_session_flow(AGENT, "F", {"tool_policies": {}}),  # pyright: ignore[reportArgumentType]
        TypeError,
        "options",
    ),
    "unknown option": (
        lambda: create_pydantic_ai_session_flow(AGENT, "F", bogus=1),
        TypeError,
        "bogus",
    ),
    "stream_text": (
        lambda: create_pydantic_ai_session_flow(AGENT, "F", stream_text="yes"),  # pyright: ignore[reportArgumentType]
        TypeError,
        "stream_text",
    ),
    "deps_factory": (
        lambda: create_pydantic_ai_session_flow(AGENT, "F", deps_factory=1),  # pyright: ignore[reportArgumentType]
        TypeError,
        "deps_factory",
    ),
    "deps and deps_factory": (
        lambda: PydanticAIRunner(AGENT, deps=1, deps_factory=lambda _: 1),
        ValueError,
        "not both",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_names_what_is_wrong(case: str) -> None:
    call, error, mentioned = BAD_CALLS[case]
    with pytest.raises(error, match=mentioned):
        call()


def test_good_input_builds_a_flow() -> None:
    flow = create_pydantic_ai_session_flow(AGENT, "F", stream_text=True)
    assert flow.get_flow_type() == "F"


def test_declare_tool_effect_sets_the_tool_metadata_on_a_copy() -> None:
    from pydantic_ai import Tool

    from dex_agents_pydantic_ai import declare_tool_effect

    def lookup(order_id: str) -> str:
        """Look up an order."""
        return order_id

    tool = Tool(lookup, metadata={"team": "orders"})
    declared = declare_tool_effect(tool, "read", requires_approval=True)
    assert declared.metadata == {
        "team": "orders",
        "dex_effect": "read",
        "dex_requires_approval": True,
    }
    assert tool.metadata == {"team": "orders"}
    with pytest.raises(TypeError, match=r"pydantic_ai\.Tool"):
        declare_tool_effect(lookup, "read")  # type: ignore[type-var]


def test_the_old_names_warn() -> None:
    import dex_agents.runner
    import dex_agents_pydantic_ai

    with pytest.warns(DeprecationWarning, match="create_pydantic_ai_session_flow"):
        old = dex_agents_pydantic_ai.create_pydantic_ai_agent_session_flow  # pyright: ignore[reportAttributeAccessIssue]
    assert old is create_pydantic_ai_session_flow
    # The name's home is the runner contract now (it left dex_agents too).
    with pytest.warns(DeprecationWarning, match=r"dex_agents\.runner\.get_deferred_tool_execution"):
        moved = dex_agents_pydantic_ai.get_deferred_tool_execution  # pyright: ignore[reportAttributeAccessIssue]
    assert moved is dex_agents.runner.get_deferred_tool_execution
