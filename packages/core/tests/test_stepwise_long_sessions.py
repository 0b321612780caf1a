"""Stepwise compaction and session settings on the real local engine."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import dex
import pytest

from dex_agents import AgentSnapshot, AgentStatus, CompactionPolicy
from dex_agents.models import ModelRequest, ScriptedModelClient, UserTextItem
from dex_agents.runner import CONTEXT_SUMMARY_INSTRUCTIONS, CONTEXT_SUMMARY_NOTE_HEADER
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow
from dex_agents.stepwise._compaction import estimate_request_tokens
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
from dex_agents.values import INVALID_START_SESSION_SETTINGS_REASON, AgentSessionStartInput
from dex_local_engine import LocalEngine

_numbers = itertools.count(1)
FILLER = "lorem ipsum dolor sit amet " * 8


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


@pytest.fixture
async def open_sessions(engine: LocalEngine) -> AsyncIterator[Any]:
    opened: list[AgentTestEnvironment] = []

    async def make(definition: AgentDefinition, **options: Any) -> AgentSessionTestClient:
        flow = create_stepwise_session_flow(definition, f"LongTest{next(_numbers)}")
        if options:
            from dataclasses import replace

            from dex_agents import create_agent_session_flow

            flow = create_agent_session_flow(
                flow.runner, flow.get_flow_type(), replace(flow.options, **options)
            )
        environment = await AgentTestEnvironment.start(
            flows=[flow], server_address=engine.address, worker_in_process=True
        )
        opened.append(environment)
        return AgentSessionTestClient(environment.client, flow)

    yield make
    for environment in opened:
        await environment.close()


def last_user_text(request: ModelRequest) -> str:
    texts = [item.text for item in request.items if isinstance(item, UserTextItem)]
    return texts[-1] if texts else ""


async def test_stepwise_compacts_and_keeps_the_input_under_the_window(open_sessions) -> None:
    answers: list[ModelRequest] = []
    summaries: list[ModelRequest] = []

    def script(request: ModelRequest) -> str:
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            summaries.append(request)
            return f"summary {len(summaries)}"
        answers.append(request)
        return f"reply to {last_user_text(request)[:12]} {FILLER}"

    window = 2_000
    definition = AgentDefinition(
        name="long",
        instructions="Answer briefly.",
        model=ScriptedModelClient(script),
        compaction=CompactionPolicy(context_window_tokens=window),
    )
    sessions = await open_sessions(definition, message_window_size=8, message_chunk_size=4)
    await sessions.start_session("long-1", f"question 1 {FILLER}")
    await sessions.wait_for_completed_turns("long-1", 1)
    for turn in range(2, 31):
        assert await sessions.send_user_message("long-1", f"question {turn} {FILLER}")
        await sessions.wait_for_completed_turns("long-1", turn)
    snapshot = await sessions.snapshot("long-1")

    assert snapshot.context_summary is not None
    assert summaries, "the session never compacted"
    assert all(estimate_request_tokens(request) < window for request in answers)
    last = answers[-1]
    first = last.items[0]
    assert isinstance(first, UserTextItem)
    assert first.text.startswith(CONTEXT_SUMMARY_NOTE_HEADER)
    assert snapshot.context_summary.summary in first.text
    # A later summary request starts with the earlier summary.
    assert isinstance(summaries[-1].items[0], UserTextItem)
    assert summaries[-1].items[0].text.startswith(CONTEXT_SUMMARY_NOTE_HEADER)
    assert summaries[-1].tools == ()
    assert snapshot.usage.model_calls == 30 + len(summaries)


async def test_session_settings_choose_the_model_per_turn(open_sessions) -> None:
    def named(name: str) -> ScriptedModelClient:
        return ScriptedModelClient(lambda request: f"{name}: {last_user_text(request)}")

    models = {"small": named("small"), "large": named("large")}
    definition = AgentDefinition(
        name="picker",
        instructions="Answer.",
        model=models["small"],
        resolve_model=lambda settings: models.get(str(settings.get("model")), models["small"]),
    )
    sessions = await open_sessions(definition)
    await sessions.start_session("pick-1", "hello", session_settings={"model": "large"})
    await sessions.wait_for_completed_turns("pick-1", 1)
    assert await sessions.update_session_settings("pick-1", {"model": "small"})
    assert not await sessions.update_session_settings("pick-1", None)
    assert not await sessions.update_session_settings("pick-1", {"x": "y" * 20_000})
    snapshot = await sessions.snapshot("pick-1")
    assert snapshot.session_settings == {"model": "small"}
    assert await sessions.send_user_message("pick-1", "again")
    snapshot = await sessions.wait_for_completed_turns("pick-1", 2)
    replies = [m.text for m in snapshot.messages if m.role == "assistant"]
    assert replies == ["large: hello", "small: again"]
    assert await sessions.update_session_settings("pick-1", {})
    assert (await sessions.snapshot("pick-1")).session_settings == {}


async def test_start_settings_over_the_limit_fail_the_session(open_sessions) -> None:
    definition = AgentDefinition(
        name="strict", instructions="Answer.", model=ScriptedModelClient(lambda r: "ok")
    )
    sessions = await open_sessions(definition)
    with pytest.raises(ValueError, match="limit is 16384"):
        await sessions.start_session("big-0", "hi", session_settings={"x": "y" * 20_000})
    # The session's own check (with its tolerance) fails the Flow at once.
    await sessions.client.start_flow(
        sessions.flow,
        "big-1",
        AgentSessionStartInput(initial_message="hi", session_settings={"x": "y" * 20_000}),
    )
    result = await sessions.client.wait_for_flow("big-1", timedelta(seconds=60))
    assert result.status is dex.FlowStatus.FAILED
    assert (result.error_message or "").startswith(INVALID_START_SESSION_SETTINGS_REASON)


async def test_cancel_turn_stops_a_summary_call_and_ends_the_turn(open_sessions) -> None:
    summary_started = asyncio.Event()
    summary_cancelled = asyncio.Event()

    async def script(request: ModelRequest) -> str:
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            summary_started.set()
            try:
                await asyncio.Event().wait()  # a summary call that never answers
            except asyncio.CancelledError:
                summary_cancelled.set()
                raise
        return f"reply to {last_user_text(request)[:12]} {FILLER}"

    definition = AgentDefinition(
        name="hung-summary",
        instructions="Answer briefly.",
        model=ScriptedModelClient(script),
        compaction=CompactionPolicy(context_window_tokens=600),
    )
    sessions = await open_sessions(definition, message_window_size=8, message_chunk_size=4)
    await sessions.start_session("hung-1", f"question 1 {FILLER}")
    for turn in range(1, 20):

        def ended_or_compacting(snapshot: AgentSnapshot, done: int = turn) -> bool:
            state = snapshot.state
            return summary_started.is_set() or (
                state is not None and state.active_turn_id is None and state.turn_count >= done
            )

        await sessions.wait_for_snapshot("hung-1", ended_or_compacting)
        if summary_started.is_set():
            break
        assert await sessions.send_user_message("hung-1", f"question {turn + 1} {FILLER}")
    assert summary_started.is_set(), "the session never started to compact"
    compacting = await sessions.wait_for_snapshot(
        "hung-1",
        lambda s: s.state is not None and s.state.status is AgentStatus.COMPACTING_CONTEXT,
        description="the session compacts",
    )
    assert await sessions.cancel_turn("hung-1")
    await sessions.wait_for_user_message_wait("hung-1", within=timedelta(seconds=60))
    await sessions.read_events(
        "hung-1",
        until=lambda events: any(event.type == "turn_cancelled" for event in events),
        description="turn_cancelled",
    )
    await asyncio.wait_for(summary_cancelled.wait(), timeout=30)
    assert (await sessions.snapshot("hung-1")).context_summary == compacting.context_summary


async def test_a_steered_turn_longer_than_the_window_keeps_every_tool_result(
    open_sessions,
) -> None:
    """The response with the calls rolls into a chunk while the calls run; ending the
    steered turn must still read it and store every call's result."""
    from dex_agents.models import ScriptedModelReply, ScriptedToolCall, ToolResultItem
    from dex_agents.stepwise import function_tool
    from dex_agents.values import ToolEffect

    calls = 6
    blocked = asyncio.Event()
    release = asyncio.Event()
    requests: list[ModelRequest] = []

    async def lookup(arguments: dict[str, Any], context: Any) -> str:
        del context
        if arguments["n"] == calls:
            blocked.set()
            await release.wait()
        return f"result {arguments['n']}"

    def script(request: ModelRequest) -> ScriptedModelReply | str:
        requests.append(request)
        if last_user_text(request) == "look everything up":
            return ScriptedModelReply(
                tool_calls=[
                    ScriptedToolCall("lookup", {"n": n}, call_id=f"c{n}")
                    for n in range(1, calls + 1)
                ]
            )
        return "done"

    definition = AgentDefinition(
        name="steered",
        instructions="Use the tool.",
        model=ScriptedModelClient(script),
        tools=[
            function_tool(
                name="lookup",
                description="Looks one thing up.",
                parameters={"type": "object"},
                execute=lookup,
                effect=ToolEffect.READ,
            )
        ],
    )
    sessions = await open_sessions(definition, message_window_size=2, message_chunk_size=2)
    await sessions.start_session("steer-long", "look everything up")
    await asyncio.wait_for(blocked.wait(), 60)
    assert await sessions.steer_user_message("steer-long", text="something else")
    release.set()
    snapshot = await sessions.wait_for_completed_turns("steer-long", 2)
    first_turn = [m for m in snapshot.messages if m.turn_id == "turn-1"]
    # More messages than the window holds: the calls' response lies in a chunk.
    assert len(first_turn) > 2
    results = [m for m in first_turn if m.role == "tool"]
    assert sorted(m.tool_call_id or "" for m in results) == [f"c{n}" for n in range(1, calls + 1)]
    # The steered turn's model call saw every call answered.
    answered = [item for item in requests[-1].items if isinstance(item, ToolResultItem)]
    assert len(answered) == calls
