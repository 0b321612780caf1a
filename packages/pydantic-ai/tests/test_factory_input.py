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
