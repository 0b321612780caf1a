"""Long-session scenarios: messages rolled into chunks read back complete, and a Worker
SIGKILL before a rollover commit or during ``CompactContext`` loses no message."""

from __future__ import annotations

from dex_agents import AgentSessionOptions
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ToolCallSpec,
    read_stored_attributes,
)
from dex_agents.values import AgentMessageIndex, from_wire_json
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import assert_sequences_without_gaps, final_answer
from dex_agents_conformance.harness import ConformanceHarness, ScenarioRun
from dex_agents_conformance.rules import ContractRule, contract_rule
from dex_agents_conformance.tools import LOOKUP_ORDER

COMPACTION_WINDOW_TOKENS = 600
"""A context window that a few short turns fill (Stepwise counts four characters a token)."""
DEFAULT_MESSAGE_WINDOW_SIZE = AgentSessionOptions().message_window_size
PLAIN_TURNS = DEFAULT_MESSAGE_WINDOW_SIZE // 2 - 1
"""Turns of two messages each that fill the window to just below its size."""


async def _run_turns(run: ScenarioRun, first: int, last: int) -> None:
    for turn in range(first, last + 1):
        assert await run.sessions.send_user_message(run.session_id, f"question {turn}")
        await run.sessions.wait_for_completed_turns(run.session_id, turn)


async def _stored_index(run: ScenarioRun) -> AgentMessageIndex | None:
    stored = await read_stored_attributes(run.engine.server_address, run.session_id)
    value = stored.get("AgentMessageIndex")
    if value is None:
        return None
    return from_wire_json(AgentMessageIndex, value.obj_value.payload)


class LongSessionScenarios:
    """Message storage scenarios; ``ConformanceSuite`` includes them."""

    @contract_rule(ContractRule.MESSAGE_STORAGE)
    async def test_sigkill_before_a_rollover_commit_loses_no_message(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.GATED_MODEL_CALLS)
        # The window fills with plain turns; the last turn's gated model call commits the
        # messages that take the window past its size, so its commit rolls the oldest over.
        script = ModelScript(
            [
                *(ModelTurn(text=f"answer {n}") for n in range(1, PLAIN_TURNS + 1)),
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]),
                ModelTurn(text_from_tool_results=True, gate="model"),
            ]
        )
        last_turn = PLAIN_TURNS + 1
        async with conformance_harness.run(script, [LOOKUP_ORDER]) as run:
            await run.start_session("question 1")
            await run.sessions.wait_for_completed_turns(run.session_id, 1)
            await _run_turns(run, 2, PLAIN_TURNS)
            assert await run.sessions.send_user_message(run.session_id, "where is order 42?")
            await run.gate("model").wait_until_reached()
            run.kill_workers()
            run.gate("model").release()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, last_turn)
            index = await _stored_index(run)
            pages: list[int] = []
            before: int | None = None
            while True:
                page = await run.sessions.list_messages(
                    run.session_id, before_sequence=before, limit=7
                )
                pages[:0] = [message.sequence for message in page.messages]
                if page.next_before_sequence is None:
                    break
                before = page.next_before_sequence

        assert snapshot.state is not None
        count = snapshot.state.message_count
        assert count > DEFAULT_MESSAGE_WINDOW_SIZE
        assert_sequences_without_gaps(snapshot.messages)
        assert [m.sequence for m in snapshot.messages] == list(range(1, count + 1))
        assert pages == list(range(1, count + 1))
        texts = [m.text for m in snapshot.messages]
        assert texts[:4] == ["question 1", "answer 1", "question 2", "answer 2"]
        assert final_answer(snapshot) == "lookup_order: order 42 shipped"
        # The oldest messages now live in a chunk, which reads back in order.
        assert index is not None
        assert index.chunks
        assert index.chunks[0].first_sequence == 1
        assert index.window_first_sequence > 1

    @contract_rule(ContractRule.MESSAGE_STORAGE)
    async def test_compaction_survives_sigkill_during_compact_context_and_retention_deletes(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.COMPACTION)
        turns = 16
        script = ModelScript([ModelTurn(text=f"answer {n}") for n in range(1, turns + 1)])
        session = ScenarioSession(
            "compaction",
            compaction_context_window_tokens=COMPACTION_WINDOW_TOKENS,
            retained_message_limit=4,
            message_window_size=4,
            message_chunk_size=2,
            summary_gate="summary",
        )
        async with conformance_harness.run(script, session=session) as run:
            await run.start_session("question 1")
            # Queued messages start one turn each, back to back.
            for turn in range(2, turns + 1):
                assert await run.sessions.send_user_message(run.session_id, f"question {turn}")
            await run.gate("summary").wait_until_reached()
            run.kill_workers()
            run.gate("summary").release()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, turns)
            page = await run.sessions.list_messages(run.session_id, limit=200)
            events = await run.sessions.read_events_through_turn(run.session_id, f"turn-{turns}")
            steps = await run.step_types()

        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        count = snapshot.state.message_count
        assert count == 2 * turns
        summary = snapshot.context_summary
        assert summary is not None
        assert "question 1" in summary.summary
        # Retention deleted summarized chunks; what stays runs without gaps to the end.
        kept = [m.sequence for m in snapshot.messages]
        assert kept == list(range(kept[0], count + 1))
        assert kept[0] > 1
        assert page.deleted_before_sequence == kept[0]
        assert [m.sequence for m in page.messages] == kept
        assert kept[0] <= summary.last_sequence + 1
        assert final_answer(snapshot) == f"answer {turns}"
        types = [event.type for event in events]
        assert "compaction_started" in types
        assert "compaction_finished" in types
        assert "CompactContext" in steps
        # The model's last input started after the summary, not at the first message.
        last = run.model_calls(f"turn-{turns}", 0)[-1]
        assert not any(
            line.removeprefix("user: ") == "question 1" for line in last.details["history"]
        )

    async def test_session_settings_start_update_and_refuse_past_the_limit(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript([ModelTurn(text="answer 1"), ModelTurn(text="answer 2")])
        async with conformance_harness.run(script) as run:
            await run.sessions.start_session(
                run.session_id, "question 1", session_settings={"tier": "small"}
            )
            first = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert await run.sessions.update_session_settings(run.session_id, {"tier": "large"})
            refused_null = await run.sessions.update_session_settings(run.session_id, None)
            refused_big = await run.sessions.update_session_settings(
                run.session_id, {"x": "y" * 20_000}
            )
            assert await run.sessions.send_user_message(run.session_id, "question 2")
            second = await run.sessions.wait_for_completed_turns(run.session_id, 2)

        assert first.session_settings == {"tier": "small"}
        assert not refused_null
        assert not refused_big
        # A refused update changes nothing; the accepted one holds for the next turn.
        assert second.session_settings == {"tier": "large"}
        assert second.state is not None
        assert second.state.last_turn_error is None
        assert final_answer(second) == "answer 2"
