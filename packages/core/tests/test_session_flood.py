"""A flood of RPCs against one session: the engine stays responsive, and every message
the session accepted is queued exactly once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import dex

from dex_agents import ToolEffect
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow, function_tool
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
from dex_local_engine import LocalEngine

FLOOD = 1_000


async def test_a_thousand_concurrent_messages_are_each_queued_once() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    @function_tool(effect=ToolEffect.READ)
    async def hold() -> str:
        """Keep the turn running while the flood arrives."""
        started.set()
        await release.wait()
        return "released"

    def script(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text="done")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("hold", {})])

    flow = create_stepwise_session_flow(
        AgentDefinition(
            name="flood", instructions="", model=ScriptedModelClient(script), tools=[hold]
        ),
        "FloodTest",
    )
    with LocalEngine() as engine:
        environment = await AgentTestEnvironment.start(
            flows=[flow], server_address=engine.address, worker_in_process=True
        )
        try:
            sessions = AgentSessionTestClient(environment.client, flow)
            await sessions.start_session("flooded", "start")
            await asyncio.wait_for(started.wait(), 60)

            began = time.perf_counter()
            sends = [
                asyncio.ensure_future(sessions.send_user_message("flooded", f"message {n}"))
                for n in range(FLOOD)
            ]
            # While the flood is in flight, the engine still answers other calls.
            assert await environment.client.health_check()
            summary = await environment.client.describe_flow("flooded")
            assert summary.flow_type == "FloodTest"
            results = await asyncio.gather(*sends, return_exceptions=True)
            seconds = time.perf_counter() - began

            accepted = [f"message {n}" for n, ok in enumerate(results) if ok is True]
            refused = [r for r in results if r is not True]
            # A refusal may only be a clear, retryable error, never a silent loss.
            assert all(
                isinstance(r, dex.DexServiceError | dex.RequestTimeoutError) for r in refused
            )
            snapshot = await sessions.snapshot("flooded")
            queued = Counter(m.text for m in snapshot.queued_messages)
            assert sorted(queued) == sorted(accepted)
            assert set(queued.values()) == {1}
            print(
                f"\n{FLOOD} concurrent send_user_message: {len(accepted)} accepted, "
                f"{len(refused)} refused, {seconds:.1f} s ({FLOOD / seconds:.0f} RPCs/s)"
            )
            assert len(accepted) == FLOOD
        finally:
            release.set()
            await environment.client.stop_flow("flooded")
            await environment.close()
