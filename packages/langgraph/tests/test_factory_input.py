"""Bad input to the public factory and runner is refused with an error that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import tool

from dex_agents_langgraph import create_langgraph_agent_session_flow


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


MODEL = GenericFakeChatModel(messages=iter([]))

BAD_CALLS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "neither model nor graph": (
        lambda: create_langgraph_agent_session_flow("F"),
        ValueError,
        "exactly one",
    ),
    "model": (lambda: create_langgraph_agent_session_flow("F", model="gpt"), TypeError, "model"),  # pyright: ignore[reportArgumentType]
    "graph": (lambda: create_langgraph_agent_session_flow("F", graph="g"), TypeError, "graph"),  # pyright: ignore[reportArgumentType]
    "one tool, not a list": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, tools=lookup),  # pyright: ignore[reportArgumentType]
        TypeError,
        "list",
    ),
    "a tool that is not a tool": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, tools=["lookup"]),  # pyright: ignore[reportArgumentType]
        TypeError,
        "LangChain tools",
    ),
    "system_prompt": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, system_prompt=1),  # pyright: ignore[reportArgumentType]
        TypeError,
        "system_prompt",
    ),
    "bind_tools_options": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, bind_tools_options=[1]),  # pyright: ignore[reportArgumentType]
        TypeError,
        "bind_tools_options",
    ),
    "messages_key with a model": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, messages_key="history"),
        ValueError,
        "messages_key",
    ),
    "flow_type": (
        lambda: create_langgraph_agent_session_flow("", model=MODEL),
        ValueError,
        "flow_type",
    ),
    "unknown option": (
        lambda: create_langgraph_agent_session_flow("F", model=MODEL, bogus=1),
        TypeError,
        "bogus",
    ),
    "bad declared effect": (
        lambda: create_langgraph_agent_session_flow(
            "F", model=MODEL, tools=[lookup.model_copy(update={"metadata": {"dex_effect": "x"}})]
        ),
        ValueError,
        "dex_effect",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_names_what_is_wrong(case: str) -> None:
    call, error, mentioned = BAD_CALLS[case]
    with pytest.raises(error, match=mentioned):
        call()


def test_good_input_builds_a_flow() -> None:
    flow = create_langgraph_agent_session_flow(
        "F", model=MODEL, tools=[lookup], system_prompt="Be brief."
    )
    assert flow.get_flow_type() == "F"
