"""A Stepwise agent whose one tool waits at a file gate, and a Worker-only process for it.

``python gated_agent.py`` serves the Flow with ``AgentHost(..., client=False).serve()``
on ``DEX_SERVER_ADDRESS``, draining for ``GATED_DRAIN_SECONDS`` (unset: the default);
``GATED_GATE_DIR`` is the gate's directory. The test builds the same Flow for its Client.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents import AgentHost, ToolEffect, WorkerTuning
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow, function_tool
from dex_agents.testing import FileGate

FLOW_TYPE = "GatedAgent"
GATE_DIRECTORY_VARIABLE = "GATED_GATE_DIR"
DRAIN_SECONDS_VARIABLE = "GATED_DRAIN_SECONDS"
GATE = "slow_lookup"


def gate() -> FileGate:
    return FileGate(Path(os.environ[GATE_DIRECTORY_VARIABLE]), GATE)


@function_tool(effect=ToolEffect.READ)
async def slow_lookup(order_id: str) -> str:
    """Look an order up, slowly: the call waits until the test opens the gate."""
    await gate().pass_through_async()
    return f"order {order_id}: shipped"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=results[-1].output)
    return ScriptedModelReply(tool_calls=(ScriptedToolCall("slow_lookup", {"order_id": "42"}),))


def build_flows() -> list[Any]:
    definition = AgentDefinition(
        name="gated",
        instructions="Look orders up.",
        model=ScriptedModelClient(_reply),
        tools=[slow_lookup],
    )
    return [create_stepwise_session_flow(definition, FLOW_TYPE)]


def main() -> None:
    seconds = os.environ.get(DRAIN_SECONDS_VARIABLE)
    tuning = WorkerTuning(
        drain_timeout=timedelta(seconds=float(seconds)) if seconds else WorkerTuning().drain_timeout
    )
    asyncio.run(AgentHost(build_flows(), client=False, worker_tuning=tuning).serve())


if __name__ == "__main__":
    main()
