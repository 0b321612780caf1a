"""Conformance scenarios of steering, queue edits, turn cancellation and plans.

``ConformanceSuite`` inherits them, so every adapter runs them; a scenario that
needs an optional capability skips, with the reason, where the adapter lacks it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import pytest

from dex_agents.runner import (
    TOOL_CALL_CANCELLED_BY_STEERING_RESULT,
    TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT,
    plan_execution_user_text,
)
from dex_agents.testing import ModelScript, ModelTurn, ToolCallSpec
from dex_agents.values import AgentSnapshot, AgentToolCallStatus
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import (
    assert_sequences_without_gaps,
    event_types,
    final_answer,
    finished_statuses,
)
from dex_agents_conformance.harness import ConformanceHarness
from dex_agents_conformance.rules import ContractRule, contract_rule
from dex_agents_conformance.tools import CHARGE_CARD, LOOKUP_ORDER

FIRST_CALL = "call-0-0"
WRITE_TODOS = "write_todos"


def _user_texts(snapshot: AgentSnapshot, turn_id: str) -> list[str | None]:
    return [m.text for m in snapshot.messages if m.turn_id == turn_id and m.role == "user"]


def _todos(*tasks: tuple[str, str]) -> dict[str, object]:
    return {"todos": [{"content": content, "status": status} for content, status in tasks]}


class TurnControlScenarios:
    """Steering, queue edits, cancellation and plans; see the module docstring."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    # --- steering ------------------------------------------------------------------

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_a_steer_during_a_model_call_starts_the_next_turn_with_it(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.GATED_MODEL_CALLS)
        script = ModelScript(
            [ModelTurn(text="first answer", gate="model"), ModelTurn(text="steered answer")]
        )
        async with conformance_harness.run(script) as run:
            await run.start_session("first question")
            await run.gate("model").wait_until_reached()
            assert await run.sessions.steer_user_message(run.session_id, text="use staging")
            steered = await run.sessions.wait_for_snapshot(
                run.session_id,
                lambda s: [m.text for m in s.steered_messages] == ["use staging"],
                description="one steered message",
            )
            assert steered.state is not None
            assert steered.state.accepts_turn_control
            # A steer never interrupts a model call: its final answer completes the turn.
            run.gate("model").release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert _user_texts(snapshot, "turn-2") == ["use staging"]
            assert final_answer(snapshot) == "steered answer"
            assert snapshot.steered_messages == ()
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            assert "turn_completed" in event_types(events, "turn-1")
            assert "turn_steered" not in event_types(events, "turn-1")
            assert_sequences_without_gaps(snapshot.messages)
            assert "ApplyTurnControl" in await run.step_types()

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_a_steer_rejects_a_call_waiting_for_approval(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[ToolCallSpec("charge_card", {"amount": 5})], last_of_turn=True
                ),
                ModelTurn(text="steered answer"),
            ]
        )
        async with conformance_harness.run(script, [CHARGE_CARD]) as run:
            await run.start_session("charge 5")
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id)
            assert await run.sessions.steer_user_message(run.session_id, text="do not charge")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert final_answer(snapshot) == "steered answer"
            assert _user_texts(snapshot, "turn-2") == ["do not charge"]
            assert run.tool_runs.count("charge_card") == 0
            assert not await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            assert finished_statuses([e for e in events if e.turn_id == "turn-1"]) == {
                FIRST_CALL: "rejected"
            }
            [resolved] = [e.payload_data() for e in events if e.type == "interrupt_resolved"]
            assert resolved["cancellation_reason"] == "steered"
            [steered] = [e.payload_data() for e in events if e.type == "turn_steered"]
            assert steered["steered_message_count"] == 1
            # The next turn's model sees what happened to the call.
            call = run.model_call("turn-2", 0)
            assert TOOL_CALL_CANCELLED_BY_STEERING_RESULT in "\n".join(call.details["history"])
            assert_sequences_without_gaps(snapshot.messages)

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_queue_edits_delete_and_steer_queued_messages(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[ToolCallSpec("lookup_order", {"order_id": "1"})], last_of_turn=True
                ),
                ModelTurn(text="second answer"),
            ]
        )
        gated = replace(LOOKUP_ORDER, gate="lookup")
        async with conformance_harness.run(script, [gated]) as run:
            await run.start_session("where is order 1?")
            await run.gate("lookup").wait_until_reached()
            assert await run.sessions.send_user_message(run.session_id, "drop me")
            assert await run.sessions.send_user_message(run.session_id, "steer me")
            queued = await run.sessions.wait_for_snapshot(
                run.session_id,
                lambda s: s.queued_message_count == 2,
                description="two queued messages",
            )
            drop, steer = queued.queued_messages
            assert await run.sessions.delete_queued_message(run.session_id, drop.message_id)
            assert not await run.sessions.delete_queued_message(run.session_id, drop.message_id)
            assert not await run.sessions.steer_user_message(
                run.session_id, message_id=drop.message_id
            )
            assert await run.sessions.steer_user_message(
                run.session_id, message_id=steer.message_id
            )
            moved = await run.sessions.snapshot(run.session_id)
            assert moved.queued_messages == ()
            assert [m.text for m in moved.steered_messages] == ["steer me"]
            # Bad input changes nothing.
            assert not await run.sessions.steer_user_message(run.session_id)
            assert not await run.sessions.steer_user_message(run.session_id, text=" \n")
            # The started tool runs to its end; then the turn ends, steered.
            run.gate("lookup").release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert run.tool_runs.count("lookup_order") == 1
            assert _user_texts(snapshot, "turn-2") == ["steer me"]
            assert "drop me" not in [m.text for m in snapshot.messages]
            call = run.model_call("turn-2", 0)
            assert "order 1 shipped" in "\n".join(call.details["history"])
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            assert finished_statuses(events)[FIRST_CALL] == "succeeded"
            assert "turn_steered" in event_types(events, "turn-1")
            assert_sequences_without_gaps(snapshot.messages)

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_steering_a_consumed_message_returns_false_and_text_queues_between_turns(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "2"})]),
                ModelTurn(text="first answer"),
                ModelTurn(text="second answer"),
                ModelTurn(text="third answer"),
            ]
        )
        gated = replace(LOOKUP_ORDER, gate="lookup")
        async with conformance_harness.run(script, [gated]) as run:
            await run.start_session("first question")
            await run.gate("lookup").wait_until_reached()
            assert await run.sessions.send_user_message(run.session_id, "second question")
            queued = await run.sessions.wait_for_snapshot(
                run.session_id,
                lambda s: s.queued_message_count == 1,
                description="one queued message",
            )
            [message] = queued.queued_messages
            run.gate("lookup").release()
            await run.sessions.wait_for_completed_turns(run.session_id, 2)
            # The session consumed it: both edits return False and change nothing.
            assert not await run.sessions.steer_user_message(
                run.session_id, message_id=message.message_id
            )
            assert not await run.sessions.delete_queued_message(run.session_id, message.message_id)
            assert not await run.sessions.cancel_turn(run.session_id)
            # No turn is active: steered text queues and starts the next turn at once.
            assert await run.sessions.steer_user_message(run.session_id, text="third question")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 3)
            assert _user_texts(snapshot, "turn-3") == ["third question"]
            assert final_answer(snapshot) == "third answer"

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_a_worker_killed_after_a_steer_commits_ends_the_turn_on_restart(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.GATED_MODEL_CALLS)
        script = ModelScript(
            [ModelTurn(text="never stored", gate="model", last_of_turn=True), ModelTurn(text="ok")]
        )
        async with conformance_harness.run(script) as run:
            await run.start_session("first question")
            await run.gate("model").wait_until_reached()
            assert await run.sessions.steer_user_message(run.session_id, text="redirected")
            # The steer has committed; the Worker dies before any Step applies it.
            run.kill_workers()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert _user_texts(snapshot, "turn-2") == ["redirected"]
            assert final_answer(snapshot) == "ok"
            assert "never stored" not in [m.text for m in snapshot.messages]
            # The retried RunModel saw the steer and made no second model call.
            assert len(run.model_calls("turn-1")) == 1
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            assert "turn_steered" in event_types(events, "turn-1")
            assert_sequences_without_gaps(snapshot.messages)

    # --- cancellation --------------------------------------------------------------

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_cancel_aborts_a_model_call_that_never_answers(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.GATED_MODEL_CALLS)
        script = ModelScript(
            [ModelTurn(text="never sent", gate="never", last_of_turn=True), ModelTurn(text="ok")]
        )
        async with conformance_harness.run(script) as run:
            await run.start_session("first question")
            # The model call blocks for good (its gate never opens, like a request that
            # never answers); only the cancellation of its attempt can end the turn.
            await run.gate("never").wait_until_reached()
            assert not await run.sessions.cancel_turn(run.session_id, "turn-9")
            assert await run.sessions.cancel_turn(run.session_id, "turn-1")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert snapshot.state is not None
            assert snapshot.state.last_turn_error is None
            assert [m.text for m in snapshot.messages] == ["first question"]
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert event_types(events, "turn-1")[-1] == "turn_cancelled"
            assert "FinishTurnCancellation" in await run.step_types()
            assert not await run.sessions.cancel_turn(run.session_id)
            assert await run.sessions.send_user_message(run.session_id, "second question")
            done = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert final_answer(done) == "ok"
            assert len(run.model_calls("turn-1")) == 1

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_cancel_during_a_tool_lets_it_finish_and_rejects_waiting_calls(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("lookup_order", {"order_id": "3"}),
                        ToolCallSpec("charge_card", {"amount": 9}),
                    ],
                    last_of_turn=True,
                ),
                ModelTurn(text="after the stop"),
            ]
        )
        gated = replace(LOOKUP_ORDER, gate="lookup")
        async with conformance_harness.run(script, [gated, CHARGE_CARD]) as run:
            await run.start_session("look up and charge")
            await run.gate("lookup").wait_until_reached()
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id)
            assert await run.sessions.cancel_turn(run.session_id)
            # The approval wait is cancelled at once; the started tool is not.
            await run.sessions.wait_for_tool_call(
                run.session_id, interrupt.tool_call_id, AgentToolCallStatus.REJECTED
            )
            assert not await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            # The started tool keeps the turn active: a second cancel changes nothing.
            assert await run.sessions.cancel_turn(run.session_id, "turn-1")
            assert not await run.sessions.steer_user_message(run.session_id, text="too late")
            run.gate("lookup").release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert run.tool_runs.count("lookup_order") == 1
            assert run.tool_runs.count("charge_card") == 0
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {
                FIRST_CALL: "succeeded",
                interrupt.tool_call_id: "rejected",
            }
            assert event_types(events, "turn-1")[-1] == "turn_cancelled"
            assert snapshot.pending_interrupts == ()
            assert await run.sessions.send_user_message(run.session_id, "again")
            await run.sessions.wait_for_completed_turns(run.session_id, 2)
            call = run.model_call("turn-2", 0)
            history = "\n".join(call.details["history"])
            assert TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT in history

    @contract_rule(ContractRule.TURN_CONTROL)
    async def test_cancel_ends_a_durable_wait(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.BUILT_IN_TOOLS)
        wait = ToolCallSpec("durable_wait", {"duration_seconds": 3600, "reason": "cool down"})
        script = ModelScript(
            [ModelTurn(tool_calls=[wait], last_of_turn=True), ModelTurn(text="ok")]
        )
        async with conformance_harness.run(script, built_in_tools=["durable_wait"]) as run:
            await run.start_session("wait an hour")
            await run.sessions.wait_for_tool_call(
                run.session_id, FIRST_CALL, AgentToolCallStatus.WAITING_FOR_TIMER
            )
            assert await run.sessions.cancel_turn(run.session_id)
            await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "rejected"}
            assert event_types(events, "turn-1")[-1] == "turn_cancelled"

    # --- plans ---------------------------------------------------------------------

    @contract_rule(ContractRule.PLANS)
    async def test_a_plan_draft_is_executed_and_completed(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.BUILT_IN_TOOLS, Capability.PLAN_MODE)
        draft = _todos(("look up order 4", "pending"))
        done = _todos(("look up order 4", "completed"))
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec(WRITE_TODOS, draft)]),
                ModelTurn(text="here is the plan"),
                # IDs unique across turns: some frameworks merge input items by ID.
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "4"}, "run-1")]),
                ModelTurn(tool_calls=[ToolCallSpec(WRITE_TODOS, done, "done-1")]),
                ModelTurn(text="done"),
            ]
        )
        async with conformance_harness.run(
            script, [LOOKUP_ORDER], built_in_tools=[WRITE_TODOS], plan_mode_enabled=True
        ) as run:
            await run.start_session(None)
            assert await run.sessions.send_user_message(
                run.session_id, "plan order 4", plan_mode=True
            )
            planned = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert planned.plan is not None
            assert (planned.plan.revision, planned.plan.status) == (1, "draft")
            assert run.tool_runs.count("lookup_order") == 0
            assert not await run.sessions.execute_plan(run.session_id, 2)
            assert await run.sessions.execute_plan(run.session_id, 1)
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert _user_texts(snapshot, "turn-2") == [plan_execution_user_text(1)]
            assert snapshot.plan is not None
            assert (snapshot.plan.revision, snapshot.plan.status) == (2, "completed")
            assert run.tool_runs.count("lookup_order") == 1
            assert final_answer(snapshot) == "done"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            updates = [e.payload_data() for e in events if e.type == "plan_updated"]
            assert [(u["revision"], u["status"]) for u in updates] == [
                (1, "draft"),
                (1, "active"),
                (2, "completed"),
            ]
            turn_two = event_types(events, "turn-2")
            assert turn_two.index("plan_execution_started") > turn_two.index("turn_started")

    @contract_rule(ContractRule.PLANS)
    async def test_a_planning_turn_rejects_other_tools_and_a_stale_approval_never_runs(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.BUILT_IN_TOOLS, Capability.PLAN_MODE)
        unoffered = Capability.UNOFFERED_TOOL_CALLS in conformance_harness.adapter.capabilities
        # The model calls a tool the planning turn does not offer, where the framework lets it.
        first = [ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "5"})])]
        script = ModelScript(
            [
                *(first if unoffered else []),
                ModelTurn(
                    tool_calls=[ToolCallSpec(WRITE_TODOS, _todos(("step one", "pending")), "p-1")]
                ),
                ModelTurn(text="plan one"),
                ModelTurn(
                    tool_calls=[ToolCallSpec(WRITE_TODOS, _todos(("step two", "pending")), "p-2")]
                ),
                ModelTurn(text="plan two"),
            ]
        )
        async with conformance_harness.run(
            script, [LOOKUP_ORDER], built_in_tools=[WRITE_TODOS], plan_mode_enabled=True
        ) as run:
            await run.start_session(None)
            assert await run.sessions.send_user_message(run.session_id, "plan", plan_mode=True)
            first = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert run.tool_runs.count("lookup_order") == 0
            assert first.plan is not None
            assert first.plan.revision == 1
            # Feedback on a draft is an ordinary message: it revises the draft.
            assert await run.sessions.send_user_message(run.session_id, "change step one")
            second = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert second.plan is not None
            assert (second.plan.revision, second.plan.status) == (2, "draft")
            assert not await run.sessions.execute_plan(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-2")
            if unoffered:
                statuses = finished_statuses([e for e in events if e.turn_id == "turn-1"])
                assert statuses[FIRST_CALL] == "rejected"
