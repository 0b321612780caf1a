"""The session Flow every process of this deployment registers.

Worker processes (``worker.py``) run its Steps; the web process (``client.py`` stands in
for it) starts sessions and reads them. Every process must build the same Flow, so it
lives in one module they all import. The model is scripted so that the deployment runs
offline as a smoke test; put your own model client in its place
(``dex_agents.models``), and your own tools.
"""

from __future__ import annotations

from dex_agents import ToolEffect
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow, function_tool

FLOW_TYPE = "OrdersAgent"


@function_tool(effect=ToolEffect.READ)
async def look_up_order(order_id: str) -> str:
    """The shipping status of order ``order_id``."""
    return f"order {order_id} shipped on Monday"


def _scripted_model(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=f"Good news: {results[-1].output}.")
    return ScriptedModelReply(tool_calls=(ScriptedToolCall("look_up_order", {"order_id": "42"}),))


flow = create_stepwise_session_flow(
    AgentDefinition(
        name="orders",
        instructions="Answer questions about orders; look them up first.",
        model=ScriptedModelClient(_scripted_model),
        tools=[look_up_order],
    ),
    FLOW_TYPE,
)
