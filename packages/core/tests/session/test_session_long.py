"""An 800-turn session: compaction and retention keep Flow state and model input bounded.

It queues every message up front, so the session runs its turns back to back; the
scripted runner is the cheapest real runner, so this runs in CI (see the README for
its time). The 2,000-turn measurement lives in ``benchmarks/long_session.py``.
"""

from __future__ import annotations

import pytest
from core_session_support import CompactingRunner, assistant_text, session_id, usage

from dex_agents import CompactionPolicy, create_agent_session_flow
from dex_agents.runner import AgentTurnContext, TurnCompleted
from dex_agents.testing import read_stored_attributes, stored_attribute_bytes
from dex_agents.values import AgentUserMessage

TURNS = 800
TEXT = "a question of a realistic length about an order, " * 3


def reply(turn: AgentTurnContext) -> TurnCompleted:
    return TurnCompleted(
        new_messages=[assistant_text(f"an answer to {turn.messages[-1].text}")], usage=usage()
    )


# 800 turns take about two minutes alone; a loaded CI machine can take more than
# twice that, past the suite's 300 s default.
@pytest.mark.timeout(900)
async def test_retention_keeps_an_800_turn_session_bounded(harness_factory) -> None:
    runner = CompactingRunner(reply, summary_chars=500)
    flow = create_agent_session_flow(
        runner,
        "LongAgent",
        compaction=CompactionPolicy(context_window_tokens=100),
        retained_message_limit=200,
    )
    sid = session_id()
    samples: dict[int, int] = {}
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, f"{TEXT} 1")
        for number in range(2, TURNS + 1):
            await harness.client.invoke_rpc(
                flow.send_user_message, sid, AgentUserMessage(text=f"{TEXT} {number}")
            )
        for checkpoint in (200, 400, 600, TURNS):
            await harness.wait_for(
                flow,
                sid,
                lambda s, turns=checkpoint: s.state is not None and s.state.turn_count >= turns,
                timeout_seconds=600,
            )
            stored = await read_stored_attributes(harness.address, sid)
            samples[checkpoint] = stored_attribute_bytes(stored)
        snapshot = await harness.wait_for_turns(flow, sid, TURNS)
        stored = await read_stored_attributes(harness.address, sid)

    assert snapshot.state is not None
    assert snapshot.state.message_count == 2 * TURNS
    assert snapshot.state.last_turn_error is None
    # Retention: at most the retained messages, the window and one chunk's slack stay.
    kept = len(snapshot.messages)
    assert 200 <= kept <= 200 + 64 + 32 + 1
    assert snapshot.messages[-1].sequence == 2 * TURNS
    chunks = [key for key in stored if key.startswith("AgentMessageChunks/")]
    window = [key for key in stored if key.startswith("AgentMessages/")]
    assert len(window) <= 64
    assert len(chunks) <= 200 // 32 + 2
    # Flow state stopped growing: the last sample is no larger than the first's bound.
    assert samples[TURNS] <= samples[200] * 1.2, samples
    # Model input stayed bounded: the summary plus at most the trigger's messages.
    assert max(len(call.messages) for call in runner.model_calls) <= 100
    assert runner.summaries
