"""A Stepwise agent that replies to each user message at once, for Worker children.

Importable by path from a Worker child (the test puts this directory on PYTHONPATH),
and built by the test itself for its Client, so both sides register the same Flow.
"""

from __future__ import annotations

from typing import Any

from dex_agents.models import ModelRequest, ScriptedModelClient, ScriptedModelReply
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow

FLOW_TYPE = "ReplyAgent"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text=f"reply to {ScriptedModelClient.user_texts(request)[-1]}")


def build_flows() -> list[Any]:
    definition = AgentDefinition(
        name="reply", instructions="Reply.", model=ScriptedModelClient(_reply)
    )
    return [create_stepwise_session_flow(definition, FLOW_TYPE)]
