"""Waits return committed state: a ``snapshot()`` read right after a wait returns shows
what the wait waited for. A turn's end event is written while its Step runs, a moment
before the Step commits; a wait that returned on the event alone let the snapshot read
after it miss the turn (issue 33 saw 3 of 20 sessions, Workers in their own processes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dex_agents import AgentHost, AgentSessionClient, AgentSessionFlow
from dex_agents.testing import KillableWorkerProcess, PrivateDexEngine

FACTORY = "reply_agent:build_flows"
SESSIONS = 30
"""Sessions at once: the more Steps commit together, the wider the window between a
Step's events and its commit."""
ROUNDS = 3


@pytest.fixture(scope="module")
def flow(worker_flow: Callable[[str], Any]) -> AgentSessionFlow:
    return worker_flow("reply_agent")


@pytest.fixture(scope="module")
def served_engine(
    tmp_path_factory: pytest.TempPathFactory, worker_flows_environment: dict[str, str]
) -> Iterator[PrivateDexEngine]:
    """An engine process and two Worker processes, as in production."""
    logs = tmp_path_factory.mktemp("committed-waits")
    environment = worker_flows_environment
    with PrivateDexEngine.start() as engine:
        workers = [
            KillableWorkerProcess.start(
                server_address=engine.server_address,
                log_path=logs / f"worker-{n}.log",
                arguments=[FACTORY],
                environment=environment,
            )
            for n in range(2)
        ]
        try:
            yield engine
        finally:
            for worker in workers:
                worker.kill()


async def _turn_then_snapshot(sessions: AgentSessionClient, session_id: str) -> bool:
    """Whether the snapshot read right after the wait shows the turn's reply."""
    await sessions.start_session(session_id)
    await sessions.wait_for_turn(session_id)
    event = await sessions.send_user_message_and_wait(session_id, "last")
    assert event.event.type == "turn_completed"
    snapshot = await sessions.snapshot(session_id)
    return bool(snapshot.messages) and snapshot.messages[-1].text == "reply to last"


async def test_a_snapshot_right_after_send_user_message_and_wait_has_the_turn(
    served_engine: PrivateDexEngine, flow: AgentSessionFlow
) -> None:
    async with AgentHost(flow, server_address=served_engine.server_address, worker=False) as host:
        sessions = host.client(flow)
        missed: list[str] = []
        for round_number in range(ROUNDS):
            ids = [f"committed-{round_number}-{n}" for n in range(SESSIONS)]
            seen = await asyncio.gather(*(_turn_then_snapshot(sessions, i) for i in ids))
            missed += [i for i, ok in zip(ids, seen, strict=True) if not ok]
    total = ROUNDS * SESSIONS
    assert not missed, f"{len(missed)} of {total} snapshots missed the last turn: {missed}"


async def test_every_snapshot_wait_returns_what_a_snapshot_read_after_it_shows(
    served_engine: PrivateDexEngine, flow: AgentSessionFlow
) -> None:
    async with AgentHost(flow, server_address=served_engine.server_address, worker=False) as host:
        sessions = host.client(flow)

        async def one(session_id: str) -> bool:
            await sessions.start_session(session_id, "first")
            waited = await sessions.wait_for_turn(session_id, 1)
            again = await sessions.wait_for_turn_or_interrupt(session_id)
            read = await sessions.snapshot(session_id)
            return waited.messages == read.messages == again.messages

        seen = await asyncio.gather(*(one(f"snapshot-wait-{n}") for n in range(SESSIONS)))
    assert all(seen)
