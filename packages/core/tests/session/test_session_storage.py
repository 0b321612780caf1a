"""Message storage, compaction and retention end to end on the local engine."""

from __future__ import annotations

import json

from core_session_support import (
    CompactingRunner,
    ScriptRunner,
    assistant_text,
    session_id,
    usage,
)

from dex_agents import CompactionPolicy, create_agent_session_flow
from dex_agents.runner import AgentTurnContext, TurnCompleted
from dex_agents.testing import read_step_history, read_stored_attributes
from dex_agents.values import AgentMessageIndex, ListAgentMessagesInput, from_wire_json


def echo(turn: AgentTurnContext) -> TurnCompleted:
    return TurnCompleted(
        new_messages=[assistant_text(f"echo {turn.messages[-1].text}")], usage=usage()
    )


async def _send_turns(harness, flow, sid: str, count: int) -> None:
    await harness.start(flow, sid, "m1")
    await harness.wait_for_turns(flow, sid, 1)
    for turn in range(2, count + 1):
        await harness.client.invoke_rpc(flow.send_user_message, sid, _message(f"m{turn}"))
        await harness.wait_for_turns(flow, sid, turn)


async def _pages_of_three(harness, flow, sid: str) -> list:
    """Every ``list_agent_messages`` page of three, newest first."""
    pages = []
    before = None
    while True:
        page = await harness.client.invoke_rpc(
            flow.list_agent_messages, sid, ListAgentMessagesInput(before, 3)
        )
        pages.append(page)
        if page.next_before_sequence is None:
            return pages
        before = page.next_before_sequence


def _message(text: str):
    from dex_agents.values import AgentUserMessage

    return AgentUserMessage(text=text)


async def test_rolled_over_messages_read_back_complete(harness_factory) -> None:
    runner = ScriptRunner(echo)
    flow = create_agent_session_flow(
        runner, "ChunkedAgent", message_window_size=4, message_chunk_size=2
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await _send_turns(harness, flow, sid, 7)
        snapshot = await harness.snapshot(flow, sid)
        stored = await read_stored_attributes(harness.address, sid)
        pages = await _pages_of_three(harness, flow, sid)

    assert [m.sequence for m in snapshot.messages] == list(range(1, 15))
    assert [m.text for m in snapshot.messages[:2]] == ["m1", "echo m1"]
    # Older messages live in chunks of two; the window keeps the newest.
    index = from_wire_json(AgentMessageIndex, stored["AgentMessageIndex"].obj_value.payload)
    window = sorted(key for key in stored if key.startswith("AgentMessages/"))
    assert len(window) <= 4
    assert window[0] == f"AgentMessages/{index.window_first_sequence:012d}"
    assert index.chunks[0].first_sequence == 1
    assert index.chunks[0].last_sequence == 2
    assert index.window_first_sequence > 1
    assert index.first_sequence == 1
    paged = [m.sequence for page in reversed(pages) for m in page.messages]
    assert paged == list(range(1, 15))
    assert all(page.deleted_before_sequence is None for page in pages)
    # Every model call saw every message, the chunked ones included.
    assert [len(call.messages) for call in runner.model_calls] == [1, 3, 5, 7, 9, 11, 13]
    assert [m.text for m in runner.model_calls[-1].messages][:3] == ["m1", "echo m1", "m2"]


async def test_compaction_summarizes_and_retention_deletes_old_chunks(harness_factory) -> None:
    runner = CompactingRunner(echo)
    flow = create_agent_session_flow(
        runner,
        "CompactingAgent",
        compaction=CompactionPolicy(
            context_window_tokens=10, trigger_ratio=0.8, retained_ratio=0.3
        ),
        message_window_size=4,
        message_chunk_size=2,
        retained_message_limit=4,
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await _send_turns(harness, flow, sid, 12)
        snapshot = await harness.snapshot(flow, sid)
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)
        page = await harness.client.invoke_rpc(
            flow.list_agent_messages, sid, ListAgentMessagesInput(None, 200)
        )
        pages = await _pages_of_three(harness, flow, sid)

    summary = snapshot.context_summary
    assert summary is not None
    assert summary.generation >= 2
    assert summary.summary.startswith("m1 echo m1")
    # The model input stays bounded and starts after the summary.
    assert max(runner_input_sizes(runner)) <= 8
    last = runner.model_calls[-1]
    assert last.context_summary == summary
    assert last.messages[0].sequence == summary.last_sequence + 1
    # Retention deleted chunks wholly before the summary, keeping at least 4 messages.
    assert snapshot.messages[0].sequence > 1
    assert snapshot.messages[-1].sequence == 24
    assert [m.sequence for m in snapshot.messages] == list(range(snapshot.messages[0].sequence, 25))
    assert page.deleted_before_sequence == snapshot.messages[0].sequence
    assert page.next_before_sequence is None
    # Paged back in threes: every page says what was deleted, and paging ends at the
    # oldest kept message.
    assert len(pages) >= 2
    assert all(p.deleted_before_sequence == snapshot.messages[0].sequence for p in pages)
    paged = [m.sequence for p in reversed(pages) for m in p.messages]
    assert paged == [m.sequence for m in snapshot.messages]
    types = [event.type for event in events]
    assert types.count("compaction_started") == types.count("compaction_finished") >= 2
    finished = [json.loads(e.payload) for e in events if e.type == "compaction_finished"]
    assert finished[-1] == {
        "generation": summary.generation,
        "through_sequence": summary.last_sequence,
    }
    assert "CompactContext" in {entry.step_type for entry in history}
    # Each summary call got only the messages after the previous summary.
    for earlier, later in zip(runner.summaries, runner.summaries[1:], strict=False):
        assert later.messages[0].sequence == earlier.through_sequence + 1
    assert snapshot.usage.model_calls == 12 + len(runner.summaries)


def runner_input_sizes(runner: ScriptRunner) -> list[int]:
    return [len(call.messages) for call in runner.model_calls]


async def test_a_runner_without_compaction_after_retention_warns_and_reads_what_is_kept(
    harness_factory, caplog
) -> None:
    """The same Flow type redeployed with a runner that cannot read the summary: its
    input starts at the oldest kept message, and each model call logs why."""
    options = {"message_window_size": 4, "message_chunk_size": 2, "retained_message_limit": 4}
    compacting = create_agent_session_flow(
        CompactingRunner(echo),
        "RedeployedAgent",
        compaction=CompactionPolicy(
            context_window_tokens=10, trigger_ratio=0.8, retained_ratio=0.3
        ),
        **options,
    )
    sid = session_id()
    async with harness_factory(compacting) as harness:
        await _send_turns(harness, compacting, sid, 12)
        before = await harness.snapshot(compacting, sid)
    first_kept = before.messages[0].sequence
    assert first_kept > 1

    plain_runner = ScriptRunner(echo)
    plain = create_agent_session_flow(plain_runner, "RedeployedAgent", **options)
    with caplog.at_level("WARNING", logger="dex_agents.session._turn"):
        async with harness_factory(plain) as harness:
            await harness.client.invoke_rpc(plain.send_user_message, sid, _message("m13"))
            await harness.wait_for_turns(plain, sid, 13)
            after = await harness.snapshot(plain, sid)

    assert after.state is not None
    assert after.state.last_turn_error is None
    assert after.messages[-1].text == "echo m13"
    given = plain_runner.model_calls[-1].messages
    assert given[0].sequence == first_kept
    assert any(
        f"retention deleted the messages before {first_kept}" in record.getMessage()
        for record in caplog.records
    )
