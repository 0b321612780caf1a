"""A Stepwise agent for Worker children: it asks a question and waits on a durable timer.

Importable by path from a Worker child (the test puts this directory on PYTHONPATH),
and built by the test itself for its Client, so both sides register the same Flow.
"""

from __future__ import annotations

from typing import Any

from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import (
    AgentDefinition,
    create_stepwise_session_flow,
)

FLOW_TYPE = "StepwiseWaitsAgent"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=" | ".join(result.output for result in results))
    return ScriptedModelReply(
        tool_calls=(
            ScriptedToolCall("ask_user", {"question": "Go on?", "choices": ["yes", "no"]}),
            ScriptedToolCall("durable_wait", {"duration_seconds": 3600, "reason": "cool down"}),
        )
    )


def build_flows() -> list[Any]:
    definition = AgentDefinition(
        name="waits",
        instructions="Ask, then wait.",
        model=ScriptedModelClient(_reply),
        built_in_tools=["ask_user", "durable_wait"],
    )
    return [create_stepwise_session_flow(definition, FLOW_TYPE)]
