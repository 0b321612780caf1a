"""Bad input to the public factory and runner is refused with an error that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, function_tool

from dex_agents import ToolEffect
from dex_agents_openai_agents import create_openai_agents_session_flow, declare_tool_effect

AGENT = Agent(name="support")

BAD_CALLS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "agent": (lambda: create_openai_agents_session_flow("agent", "F"), TypeError, "agent"),  # pyright: ignore[reportArgumentType]
    "flow_type": (lambda: create_openai_agents_session_flow(AGENT, ""), ValueError, "flow_type"),
    "options": (
        lambda: create_openai_agents_session_flow(AGENT, "F", {"tool_policies": {}}),  # pyright: ignore[reportArgumentType]
        TypeError,
        "options",
    ),
    "unknown option": (
        lambda: create_openai_agents_session_flow(AGENT, "F", bogus=1),
        TypeError,
        "bogus",
    ),
    "run_config": (
        lambda: create_openai_agents_session_flow(AGENT, "F", run_config={}),  # pyright: ignore[reportArgumentType]
        TypeError,
        "run_config",
    ),
    "context_factory": (
        lambda: create_openai_agents_session_flow(AGENT, "F", context_factory=1),  # pyright: ignore[reportArgumentType]
        TypeError,
        "context_factory",
    ),
    "tracing": (
        lambda: create_openai_agents_session_flow(AGENT, "F", sdk_tracing="no"),  # pyright: ignore[reportArgumentType]
        TypeError,
        "tracing",
    ),
    "declared effect": (
        lambda: declare_tool_effect(function_tool(lambda: "x", name_override="t"), "sometimes"),
        ValueError,
        "effect",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_names_what_is_wrong(case: str) -> None:
    call, error, mentioned = BAD_CALLS[case]
    with pytest.raises(error, match=mentioned):
        call()


def test_session_options_may_be_given_as_keywords() -> None:
    flow = create_openai_agents_session_flow(
        AGENT, "F", default_tool_effect=ToolEffect.READ, sdk_tracing=True
    )
    assert flow.get_flow_type() == "F"
    assert flow.options.default_tool_effect is ToolEffect.READ
