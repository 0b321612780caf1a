"""Bad input to the public factory and runner is refused with an error that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dex_agents_claude_sdk import claude_tool, create_claude_session_flow


def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


def flow(model: str = "claude-x", **arguments: Any) -> Any:
    return create_claude_session_flow(model, "F", **arguments)


BAD_CALLS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "model": (lambda: flow(model=""), ValueError, "model"),
    "one tool, not a list": (lambda: flow(tools=lookup), TypeError, "list"),
    "a tool that is not a tool": (lambda: flow(tools=[1]), TypeError, "tool"),
    "two tools with one name": (lambda: flow(tools=[lookup, lookup]), ValueError, "lookup"),
    "max_tokens": (lambda: flow(max_tokens=0), ValueError, "max_tokens"),
    "max_tokens bool": (lambda: flow(max_tokens=True), ValueError, "max_tokens"),
    "thinking": (lambda: flow(thinking="on"), TypeError, "thinking"),
    "temperature": (lambda: flow(temperature="hot"), TypeError, "temperature"),
    "system_prompt": (lambda: flow(system_prompt=1), TypeError, "system_prompt"),
    "system_prompt blocks": (lambda: flow(system_prompt=["text"]), TypeError, "system_prompt"),
    "request_options": (lambda: flow(request_options=[("a", 1)]), TypeError, "request_options"),
    "reserved request option": (
        lambda: flow(request_options={"max_tokens": 5}),
        ValueError,
        "max_tokens",
    ),
    "client_factory": (lambda: flow(client_factory=1), TypeError, "client_factory"),
    "api_key_env": (lambda: flow(api_key_env=""), ValueError, "api_key_env"),
    "flow_type": (
        lambda: create_claude_session_flow("claude-x", ""),
        ValueError,
        "flow_type",
    ),
    "unknown option": (lambda: flow(bogus=1), TypeError, "bogus"),
    "effect": (lambda: claude_tool(lookup, effect="sometimes"), ValueError, "sometimes"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_names_what_is_wrong(case: str) -> None:
    call, error, mentioned = BAD_CALLS[case]
    with pytest.raises(error, match=mentioned):
        call()


def test_good_input_builds_a_flow() -> None:
    built = flow(
        tools=[claude_tool(lookup, effect="read")],
        system_prompt=[{"type": "text", "text": "Be brief."}],
        thinking={"type": "enabled", "budget_tokens": 1024},
        temperature=1,
    )
    assert built.get_flow_type() == "F"


def test_the_old_factory_warns_and_still_builds_a_flow() -> None:
    import dex_agents_claude_sdk

    with pytest.warns(DeprecationWarning, match="create_claude_session_flow"):
        old = dex_agents_claude_sdk.create_claude_agent_session_flow  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.warns(DeprecationWarning, match="create_claude_session_flow"):
        built = old("F", model="claude-x", tools=[lookup])
    assert built.get_flow_type() == "F"


def test_declare_tool_effect_and_a_dict_tool_definition() -> None:
    from dex_agents import ToolEffect
    from dex_agents_claude_sdk import ClaudeTool, declare_tool_effect

    declared = declare_tool_effect(lookup, "read", requires_approval=True)
    assert isinstance(declared, ClaudeTool)
    assert (declared.effect, declared.requires_approval) == (ToolEffect.READ, True)
    definition = {
        "name": "find",
        "description": "Find it.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    tool = claude_tool(lambda **tool_input: str(tool_input), **definition)
    assert tool.definition() == definition
    with pytest.raises(ValueError, match="input_schema"):
        claude_tool(tool.function_tool, input_schema=definition["input_schema"])
