"""AgentHost's engine settings: durability, and retention of closed sessions."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import dex
import pytest

from dex_agents import (
    AgentHost,
    AgentSessionClient,
    AgentSessionFlow,
    EmbeddedEngineOptions,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.values import FrameworkMessage, empty_agent_usage

EXPECTED_REPLY = "noted"


class NoteRunner:
    """Answers every user message with one text and no tool call."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        del turn
        reply = FrameworkMessage(role="assistant", framework_item="noted", text=EXPECTED_REPLY)
        return TurnCompleted([reply], empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise AssertionError(f"no tools here, got {call.tool_call.tool_name}")


def _build_flow() -> AgentSessionFlow:
    return create_agent_session_flow(NoteRunner(), "RetentionTestAgent")


async def _run_turn(sessions: AgentSessionClient, session_id: str) -> str:
    await sessions.start_session(session_id, "remember this")
    snapshot = await sessions.wait_for_turn(session_id, 1)
    reply = snapshot.messages[-1].text
    assert reply is not None
    return reply


@pytest.mark.parametrize("placement", ["loop", "thread"])
async def test_power_loss_durability_syncs_every_commit(tmp_path: Path, placement: str) -> None:
    database = tmp_path / "dex.sqlite3"
    options = EmbeddedEngineOptions(placement=placement, durability="power-loss")  # type: ignore[arg-type]
    async with AgentHost(_build_flow(), database=database, engine_options=options) as host:
        assert await _run_turn(host.client(), "synced-1") == EXPECTED_REPLY
        engine = host._engine_server or host._engine  # pyright: ignore[reportPrivateUsage]
        assert engine is not None
        assert engine.durability.value == "power-loss"


async def test_closed_sessions_past_the_retention_are_purged(tmp_path: Path) -> None:
    database = tmp_path / "dex.sqlite3"
    async with AgentHost(_build_flow(), database=database) as host:
        sessions = host.client()
        assert await _run_turn(sessions, "closed-1") == EXPECTED_REPLY
        assert await _run_turn(sessions, "open-1") == EXPECTED_REPLY
        await host.dex_client.stop_flow(
            "closed-1", dex.StopFlowOptions(dex.StopType.TERMINATE, "done")
        )
    # A week's retention keeps the session that just closed.
    week = EmbeddedEngineOptions(closed_session_retention=timedelta(days=7))
    async with AgentHost(_build_flow(), database=database, engine_options=week) as host:
        assert (await host.dex_client.describe_flow("closed-1")).flow_id == "closed-1"
    # A retention of zero purges it at start, with everything it stored; the open one stays.
    now = EmbeddedEngineOptions(closed_session_retention=timedelta(0))
    async with AgentHost(_build_flow(), database=database, engine_options=now) as host:
        with pytest.raises(dex.FlowNotFoundError):
            await host.dex_client.describe_flow("closed-1")
        snapshot = await host.client().snapshot("open-1")
        assert snapshot.messages[-1].text == EXPECTED_REPLY
    with sqlite3.connect(database) as db:
        for table in ("flows", "attributes", "history", "stream_msgs"):
            query = f"SELECT COUNT(*) FROM {table} WHERE flow_id = 'closed-1'"
            assert db.execute(query).fetchone()[0] == 0


def test_bad_engine_settings_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="durability must be one of"):
        EmbeddedEngineOptions(durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="closed_session_retention must be a timedelta"):
        EmbeddedEngineOptions(closed_session_retention=timedelta(seconds=-1))
