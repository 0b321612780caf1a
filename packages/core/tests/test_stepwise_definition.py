"""``AgentDefinition`` refuses bad values when it is built, with a message naming the field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dex_agents import ToolEffect, ToolPolicy
from dex_agents.models import (
    ScriptedModelClient,
)
from dex_agents.stepwise import (
    AgentDefinition,
    create_stepwise_session_flow,
    function_tool,
)


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return order_id


MODEL = ScriptedModelClient(lambda request: "ok")


def _build(**values: Any) -> Any:
    definition = AgentDefinition(
        **{"name": "support", "instructions": "Help.", "model": MODEL, **values}
    )
    return create_stepwise_session_flow(definition, "Support")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"name": " "}, "name must be a non-blank string"),
        ({"instructions": 5}, "instructions must be a string or a function"),
        ({"model": object()}, "model must be a ModelClient"),
        ({"model_settings": {"temperature": 1}}, "model_settings must be ModelSettings"),
        ({"tools": lookup_order}, "tools must be a list or tuple"),
        ({"tools": [lookup_order, "x"]}, "not a FunctionTool"),
        ({"tools": [lookup_order, lookup_order]}, "two function tools are named lookup_order"),
        ({"tool_sources": [object()]}, "not a ToolSource"),
        ({"built_in_tools": "ask_user"}, "built_in_tools must be a list or tuple"),
        ({"built_in_tools": ["teleport"]}, "unknown built-in tool 'teleport'"),
        ({"tool_policies": [("a", 1)]}, "tool_policies must be a mapping"),
        ({"tool_policies": {"lookup_order": "read"}}, "must be a ToolPolicy"),
        (
            {
                "built_in_tools": ["ask_user"],
                "tool_policies": {"ask_user": ToolPolicy(ToolEffect.READ)},
            },
            "fixed policy",
        ),
        ({"default_tool_effect": "read"}, "default_tool_effect must be a ToolEffect"),
        ({"max_model_calls_per_turn": 0}, "max_model_calls_per_turn must be a positive integer"),
        ({"max_model_calls_per_turn": True}, "max_model_calls_per_turn"),
        ({"interrupt_deadline": 60}, "interrupt_deadline"),
        ({"event_stream_capacity_bytes": 0}, "event_stream_capacity_bytes"),
        ({"tool_source_listing_timeout": 5}, "tool_source_listing_timeout must be a positive"),
        ({"tool_source_listing_timeout": timedelta(0)}, "tool_source_listing_timeout"),
    ],
)
def test_bad_definitions_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        _build(**values)


def test_a_good_definition_gives_its_options_to_the_session() -> None:
    flow = _build(
        tools=[lookup_order],
        built_in_tools=["ask_user"],
        tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)},
        interrupt_deadline=timedelta(hours=1),
        event_stream_capacity_bytes=4096,
    )
    assert flow.options.built_in_tools == ("ask_user",)
    assert flow.options.interrupt_deadline == timedelta(hours=1)
    assert flow.options.tool_policies["lookup_order"].effect is ToolEffect.READ
    assert flow.agent_events.stream_capacity_bytes == 4096
