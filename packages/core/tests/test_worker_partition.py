"""A Worker cut off without a reset (a partition, a host that lost power) holds no session.

Its connections stay open on the engine's side: nothing tells the engine the peer is
gone, and a task the engine hands to one of its idle pull streams never starts. The
engine pings every connection (gRPC keepalive: every 10 s, answered within 10 s) and
drops one whose peer does not answer, so the task fails as a lost Worker's does and
the next goes to a Worker that answers. Before the keepalive the RPC below waited on
the cut-off Worker until the client's 30 s deadline (``RequestTimeoutError``), and the
task stayed with that Worker for as long as the partition lasted (gRPC's own ping
timeout is 60 s, TCP's keepalive 2 hours).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import dex
import pytest

from dex_agents import AgentHost, AgentSessionFlow
from dex_agents.models import ModelRequest, ScriptedModelClient, ScriptedModelReply
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow
from dex_agents.testing import PrivateDexEngine
from dex_agents.testing._fault_proxy import FaultProxy

FOREVER_SECONDS = 24 * 3600.0
STUCK = timedelta(seconds=150)
"""Far past the keepalive's detection (at most 20 s): the session is stuck."""


def _reply(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text=f"heard: {ScriptedModelClient.user_texts(request)[-1]}")


def _flow() -> AgentSessionFlow:
    definition = AgentDefinition(
        name="partition", instructions="Echo.", model=ScriptedModelClient(_reply)
    )
    return create_stepwise_session_flow(definition, "PartitionTestAgent")


async def test_a_partitioned_worker_loses_its_tasks_to_one_that_answers() -> None:
    flow = _flow()
    with PrivateDexEngine.start() as engine:
        proxy = await asyncio.to_thread(
            FaultProxy.start, engine.server_address, ["cut-off", "healthy", "client"]
        )
        cut_off = AgentHost(flow, server_address=proxy.address("cut-off"), client=False)
        healthy = AgentHost(flow, server_address=proxy.address("healthy"), client=False)
        client = AgentHost(flow, server_address=proxy.address("client"), worker=False)
        try:
            await cut_off.start()
            await client.start()
            sessions = client.client()
            await sessions.start_session("partition-1", "one")
            await sessions.wait_for_turn("partition-1", 1)
            # The Worker's streams sit idle: cut it off. The next RPC task goes to one
            # of them; the engine must find the Worker gone and fail the task, rather
            # than hold it until the client's deadline passes (RequestTimeoutError).
            proxy.black_hole("cut-off", FOREVER_SECONDS, heal=True)
            with pytest.raises(dex.WorkerInvocationError):
                await sessions.send_user_message("partition-1", "lost")
            await healthy.start()
            assert await sessions.send_user_message("partition-1", "two")
            snapshot = await sessions.wait_for_turn("partition-1", 2, within=STUCK)
            texts = [m.text for m in snapshot.messages]
            assert texts == ["one", "heard: one", "two", "heard: two"]
        finally:
            await client.stop()
            await healthy.stop()
            await asyncio.to_thread(proxy.close)  # resets the cut-off connections
            with contextlib.suppress(Exception):
                await cut_off.stop()
