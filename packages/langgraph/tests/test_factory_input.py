"""Bad input to the public factory and runner is refused with an error that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import tool

from dex_agents_langgraph import create_langgraph_session_flow


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


MODEL = GenericFakeChatModel(messages=iter([]))

BAD_CALLS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "model": (lambda: create_langgraph_session_flow("gpt", "F"), TypeError, "model"),  # pyright: ignore[reportArgumentType]
    "graph": (lambda: create_langgraph_session_flow("g", "F"), TypeError, "graph"),  # pyright: ignore[reportArgumentType]
    "one tool, not a list": (
        lambda: create_langgraph_session_flow(MODEL, "F", tools=lookup),  # pyright: ignore[reportArgumentType]
        TypeError,
        "list",
    ),
    "a tool that is not a tool": (
        lambda: create_langgraph_session_flow(MODEL, "F", tools=["lookup"]),  # pyright: ignore[reportArgumentType]
        TypeError,
        "LangChain tools",
    ),
    "system_prompt": (
        lambda: create_langgraph_session_flow(MODEL, "F", system_prompt=1),  # pyright: ignore[reportArgumentType]
        TypeError,
        "system_prompt",
    ),
    "bind_tools_options": (
        lambda: create_langgraph_session_flow(MODEL, "F", bind_tools_options=[1]),  # pyright: ignore[reportArgumentType]
        TypeError,
        "bind_tools_options",
    ),
    "messages_key with a model": (
        lambda: create_langgraph_session_flow(MODEL, "F", messages_key="history"),
        ValueError,
        "messages_key",
    ),
    "flow_type": (
        lambda: create_langgraph_session_flow(MODEL, ""),
        ValueError,
        "flow_type",
    ),
    "unknown option": (
        lambda: create_langgraph_session_flow(MODEL, "F", bogus=1),
        TypeError,
        "bogus",
    ),
    "bad declared effect": (
        lambda: create_langgraph_session_flow(
            MODEL,
            "F",
            tools=[lookup.model_copy(update={"metadata": {"dex_effect": "x"}})],
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
    flow = create_langgraph_session_flow(
        MODEL,
        "F",
        tools=[lookup],
        system_prompt="Be brief.",
    )
    assert flow.get_flow_type() == "F"


def test_the_old_factory_warns_and_still_builds_a_flow() -> None:
    import dex_agents_langgraph

    with pytest.warns(DeprecationWarning, match="create_langgraph_session_flow"):
        old = dex_agents_langgraph.create_langgraph_agent_session_flow  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.warns(DeprecationWarning, match="model_or_graph"):
        flow = old("F", model=MODEL, tools=[lookup])
    assert flow.get_flow_type() == "F"
    with (
        pytest.warns(DeprecationWarning, match="model_or_graph"),
        pytest.raises(ValueError, match="exactly one"),
    ):
        old("F")
