"""The conformance scenarios, written once against neutral model scripts.

Subclass ``ConformanceSuite`` in a test module that provides the
``conformance_adapter`` fixture; pytest then runs every scenario against that
adapter. Each scenario asserts only session-level facts: Step history, tool call
outcomes (``tool_call_finished`` events), interrupts, stored messages, what the
model answered from the results it saw, and how often each tool really ran.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import ClassVar

import dex
import pytest

from dex_agents import AgentSessionOptions
from dex_agents.runner import (
    APPROVAL_DEADLINE_PASSED,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TURN_FAILURE_NOTE_HEADER,
)
from dex_agents.testing import (
    ALWAYS,
    ModelScript,
    ModelTurn,
    StepMethod,
    StepOutcome,
    ToolBehaviour,
    ToolCallSpec,
    read_step_history,
)
from dex_agents.values import AgentToolCallStatus
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.capabilities_suite import RunnerCapabilityScenarios
from dex_agents_conformance.checks import (
    assert_sequences_without_gaps,
    event_types,
    final_answer,
    finished_statuses,
)
from dex_agents_conformance.contract_rules_suite import ContractRuleScenarios
from dex_agents_conformance.harness import ConformanceHarness
from dex_agents_conformance.long_sessions import LongSessionScenarios
from dex_agents_conformance.mcp_suite import McpScenarios
from dex_agents_conformance.rules import ContractRule, checking, contract_rule
from dex_agents_conformance.tool_task_suite import ToolTaskScenarios
from dex_agents_conformance.tools import CHARGE_CARD, LOOKUP_ORDER, LOOKUP_STOCK, REFUND_ORDER
from dex_agents_conformance.turn_control_suite import TurnControlScenarios

READ_TOOL_TURN = [
    ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]),
    ModelTurn(text_from_tool_results=True),
]
SESSION_EVENTS = frozenset(
    {
        "turn_started",
        "turn_completed",
        "turn_failed",
        "usage_recorded",
        "tool_call_deferred",
        "tool_call_started",
        "tool_call_finished",
    }
)
"""Events the session itself writes (runners add text deltas and their own events)."""
FIRST_CALL = "call-0-0"
SECOND_CALL = "call-0-1"


class ConformanceSuite(
    ContractRuleScenarios,
    TurnControlScenarios,
    LongSessionScenarios,
    ToolTaskScenarios,
    RunnerCapabilityScenarios,
    McpScenarios,
):
    """Every scenario of the suite; see the module docstring.

    The runner contract's rules one by one come from ``ContractRuleScenarios``, the
    steering, cancellation and plan scenarios from ``TurnControlScenarios``, the
    message storage, retention and compaction ones from ``LongSessionScenarios``, the
    tool task ones from ``ToolTaskScenarios``, tool questions, a forced planning tool
    choice and per-session models from ``RunnerCapabilityScenarios``, and MCP tasks with
    questions, their cancellation and the ``traceparent`` in ``_meta`` from
    ``McpScenarios``. Every failure names the contract rule it checks
    (``dex_agents_conformance.rules``).
    """

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    # --- turns ---------------------------------------------------------------------

    @contract_rule(ContractRule.NO_TOOL_IN_MODEL_STEP)
    async def test_read_tool_turn_runs_four_steps_and_history_replays_next_turn(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript([*READ_TOOL_TURN, ModelTurn(text="you are welcome")])
        async with conformance_harness.run(script, [LOOKUP_ORDER]) as run:
            await run.start_session("where is order 42?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "lookup_order: order 42 shipped"
            assert await run.step_types() == [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
            ]
            assert run.tool_runs.count("lookup_order") == 1
            assert snapshot.tool_calls == (), "records belong to the active turn only"
            assert snapshot.state is not None
            assert snapshot.state.last_turn_error is None

            assert await run.sessions.send_user_message(run.session_id, "thanks")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert final_answer(snapshot) == "you are welcome"
            assert_sequences_without_gaps(snapshot.messages)
            second_turn_call = run.model_call("turn-2", 0)
            history = "\n".join(second_turn_call.details["history"])
            assert "where is order 42?" in history
            assert "order 42 shipped" in history
            assert "thanks" in history
            steps = await run.step_types()
            assert steps[5:] == ["AwaitUserMessage", "RunModel"]
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            session_events = [t for t in event_types(events, "turn-1") if t in SESSION_EVENTS]
            assert session_events == [
                "turn_started",
                "usage_recorded",
                "tool_call_deferred",
                "tool_call_started",
                "tool_call_finished",
                "usage_recorded",
                "turn_completed",
            ]
            [deferred] = [e.payload_data() for e in events if e.type == "tool_call_deferred"]
            assert deferred == {
                "tool_call_id": FIRST_CALL,
                "tool_name": "lookup_order",
                "effect": "read",
                "requires_approval": False,
            }
            assert finished_statuses(events) == {FIRST_CALL: "succeeded"}

    @contract_rule(ContractRule.NO_TOOL_IN_MODEL_STEP)
    async def test_tool_calls_of_one_response_run_in_parallel_steps(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("lookup_order", {"order_id": "7"}),
                        ToolCallSpec("lookup_stock", {"sku": "lamp"}),
                    ]
                ),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        tools = [
            replace(LOOKUP_ORDER, gate="order"),
            replace(LOOKUP_STOCK, gate="stock"),
        ]
        async with conformance_harness.run(script, tools) as run:
            await run.start_session("order 7 and a lamp?")
            # Both tools are inside their Steps at once before either may finish.
            await run.gate("order").wait_until_reached()
            await run.gate("stock").wait_until_reached()
            run.gate("order").release()
            run.gate("stock").release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert (
                final_answer(snapshot)
                == "lookup_order: order 7 shipped\nlookup_stock: lamp in stock"
            )
            steps = await run.step_types()
            assert steps[:2] == ["StartAgentSession", "RunModel"]
            assert sorted(steps[2:4]) == ["CallTool", "CallTool"]
            assert steps[4:] == ["ResumeTurn", "RunModel"]

    @contract_rule(ContractRule.STORED_TRANSCRIPT)
    async def test_stored_messages_show_every_tool_call_and_result_alike(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """The display fields, as the core README's runner contract defines them.

        One assistant message per tool call (in the model's order) names the call;
        one tool message per result names the call and its tool and holds the output.
        """
        conformance_harness.require(Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("lookup_order", {"order_id": "7"}),
                        ToolCallSpec("lookup_stock", {"sku": "lamp"}),
                    ]
                ),
                ModelTurn(text="both found"),
            ]
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER, LOOKUP_STOCK]) as run:
            await run.start_session("order 7 and a lamp?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            messages = snapshot.messages
            assert messages[0].role == "user"
            assert messages[0].text == "order 7 and a lamp?"
            calls = [m for m in messages if m.role == "assistant" and m.tool_call_id is not None]
            assert [
                (m.tool_call_id, m.tool_name, json.loads(m.tool_arguments or "null")) for m in calls
            ] == [
                (FIRST_CALL, "lookup_order", {"order_id": "7"}),
                (SECOND_CALL, "lookup_stock", {"sku": "lamp"}),
            ]
            assert all(m.tool_output is None for m in calls)
            results = {m.tool_call_id or "": m for m in messages if m.role == "tool"}
            assert sorted(results) == [FIRST_CALL, SECOND_CALL]
            assert results[FIRST_CALL].tool_name == "lookup_order"
            assert results[SECOND_CALL].tool_name == "lookup_stock"
            assert "order 7 shipped" in (results[FIRST_CALL].tool_output or "")
            assert "lamp in stock" in (results[SECOND_CALL].tool_output or "")
            assert all(m.tool_arguments is None and not m.text for m in results.values())
            # Every call is shown before its result, and the answer comes last.
            order = [m.tool_call_id for m in messages if m.tool_call_id is not None]
            for call_id in (FIRST_CALL, SECOND_CALL):
                assert order.index(call_id) < len(order) - 1 - order[::-1].index(call_id)
            assert messages[-1].role == "assistant"
            assert messages[-1].text == "both found"
            assert messages[-1].tool_call_id is None

    @contract_rule(ContractRule.MESSAGE_STORAGE)
    async def test_send_user_message_during_a_turn_starts_the_next_turn(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "1"})]),
                ModelTurn(text="first answer"),
                ModelTurn(text="second answer"),
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
            assert [m.text for m in queued.queued_messages] == ["second question"]
            run.gate("lookup").release()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            users = [m.text for m in snapshot.messages if m.role == "user"]
            assert users == ["first question", "second question"]
            answers = [m.text for m in snapshot.messages if m.role == "assistant" and m.text]
            assert answers == ["first answer", "second answer"]
            assert snapshot.queued_message_count == 0
            assert_sequences_without_gaps(snapshot.messages)

    @contract_rule(ContractRule.MESSAGE_STORAGE)
    async def test_snapshots_and_message_paging(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript([ModelTurn(text=f"answer {n}") for n in range(1, 4)])
        async with conformance_harness.run(script) as run:
            await run.start_session("question 1")
            await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert not await run.sessions.send_user_message(run.session_id, " \t\n")
            for turn in (2, 3):
                assert await run.sessions.send_user_message(run.session_id, f"question {turn}")
                await run.sessions.wait_for_completed_turns(run.session_id, turn)
            snapshot = await run.sessions.snapshot(run.session_id)
            assert snapshot.state is not None
            assert snapshot.state.turn_count == 3
            assert snapshot.state.message_count == 6
            assert [m.text for m in snapshot.messages] == [
                "question 1",
                "answer 1",
                "question 2",
                "answer 2",
                "question 3",
                "answer 3",
            ]
            assert [m.turn_id for m in snapshot.messages[::2]] == ["turn-1", "turn-2", "turn-3"]
            assert snapshot.pending_interrupts == ()
            assert snapshot.usage.model_calls >= 3

            pages: list[list[int]] = []
            before: int | None = None
            while True:
                page = await run.sessions.list_messages(
                    run.session_id, before_sequence=before, limit=2
                )
                pages.append([m.sequence for m in page.messages])
                if page.next_before_sequence is None:
                    break
                before = page.next_before_sequence
            assert pages == [[5, 6], [3, 4], [1, 2]]
            everything = await run.sessions.list_messages(run.session_id)
            assert [m.sequence for m in everything.messages] == [1, 2, 3, 4, 5, 6]
            assert everything.next_before_sequence is None
            assert everything.deleted_before_sequence is None
            one = await run.sessions.list_messages(run.session_id, limit=0)
            assert [m.sequence for m in one.messages] == [6]

    @contract_rule(ContractRule.MESSAGE_STORAGE)
    async def test_an_oversized_message_is_refused_and_no_session_is_blocked(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """A message too large to store gets ``False`` (or the engine's clear error), is
        never queued, and neither its session nor one beside it on the Worker stalls."""
        script = ModelScript([ModelTurn(text=f"answer {n}") for n in range(1, 4)])
        limit = AgentSessionOptions().max_user_message_bytes
        async with conformance_harness.run(script) as run:
            other = f"{run.session_id}-beside"
            await run.start_session("question 1")
            await run.sessions.start_session(other, "question 1")
            await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert not await run.sessions.send_user_message(run.session_id, "x" * (limit + 1))
            # The limit counts UTF-8 bytes of the text: two per "é".
            assert not await run.sessions.send_user_message(run.session_id, "é" * (limit // 2 + 1))
            with pytest.raises(dex.DexServiceError, match="max_value_bytes"):
                await run.sessions.send_user_message(run.session_id, "x" * (3 * limit * 2))
            largest = "y" * limit
            assert await run.sessions.send_user_message(run.session_id, largest)
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert [m.text for m in snapshot.messages][2:] == [largest, "answer 2"]
            assert snapshot.state is not None
            assert snapshot.state.last_turn_error is None
            assert await run.sessions.send_user_message(run.session_id, "question 3")
            await run.sessions.wait_for_completed_turns(run.session_id, 3)
            await run.sessions.wait_for_completed_turns(other, 1)
            assert await run.sessions.send_user_message(other, "question 2")
            beside = await run.sessions.wait_for_completed_turns(other, 2)
            assert [m.text for m in beside.messages] == [
                "question 1",
                "answer 1",
                "question 2",
                "answer 2",
            ]

    # --- approvals -----------------------------------------------------------------

    @contract_rule(ContractRule.APPROVALS)
    async def test_a_read_runs_while_a_sibling_write_waits_for_approval(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("charge_card", {"amount": 5}),
                        ToolCallSpec("lookup_order", {"order_id": "9"}),
                    ]
                ),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [CHARGE_CARD, LOOKUP_ORDER]) as run:
            await run.start_session("charge and look up")
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id, "charge_card")
            assert interrupt.tool_call_id == FIRST_CALL
            assert interrupt.kind.value == "approval"
            snapshot = await run.sessions.wait_for_tool_call(
                run.session_id, SECOND_CALL, AgentToolCallStatus.SUCCEEDED
            )
            assert snapshot.output == "order 9 shipped"
            during = await run.sessions.snapshot(run.session_id)
            statuses = {c.tool_call_id: c.status for c in during.tool_calls}
            assert statuses[FIRST_CALL] is AgentToolCallStatus.AWAITING_APPROVAL
            assert run.tool_runs.count("charge_card") == 0
            assert await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            done = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(done) == "charge_card: charged 5\nlookup_order: order 9 shipped"
            assert run.tool_runs.count("charge_card") == 1
            assert "AwaitToolApproval" in await run.step_types()
            assert "CallSingleAttemptTool" in await run.step_types()

    @contract_rule(ContractRule.TOOL_RESULTS)
    async def test_a_rejection_reaches_the_model_with_its_message(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 500})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [CHARGE_CARD]) as run:
            await run.start_session("charge 500")
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id)
            assert await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, False, "too expensive"
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "rejected"}
            assert run.tool_runs.count("charge_card") == 0
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert final_answer(snapshot) == "charge_card: too expensive"

    @contract_rule(ContractRule.APPROVALS)
    async def test_a_duplicate_resolve_interrupt_returns_false(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 5})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [CHARGE_CARD]) as run:
            await run.start_session("charge 5")
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id)
            assert not await run.sessions.resolve_interrupt(run.session_id, "no-such-id", True)
            assert await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            assert not await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            assert not await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, False, "changed my mind"
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "charge_card: charged 5"
            assert run.tool_runs.count("charge_card") == 1

    @contract_rule(ContractRule.APPROVALS)
    async def test_an_unanswered_approval_is_rejected_at_its_deadline(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 5})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(
            script, [CHARGE_CARD], interrupt_deadline=timedelta(seconds=2)
        ) as run:
            await run.start_session("charge 5")
            # Read the interrupt from the events, so a slow machine cannot miss it pending.
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            [raised] = [e.payload_data() for e in events if e.type == "interrupt_raised"]
            assert raised["deadline"] is not None
            assert not await run.sessions.resolve_interrupt(
                run.session_id, raised["interrupt_id"], True
            )
            assert finished_statuses(events) == {FIRST_CALL: "rejected"}
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert final_answer(snapshot) == f"charge_card: {APPROVAL_DEADLINE_PASSED}"
            assert run.tool_runs.count("charge_card") == 0

    @contract_rule(ContractRule.APPROVALS)
    async def test_the_deadline_rejects_only_the_unresolved_of_two_interrupts(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec("charge_card", {"amount": 5}),
                        ToolCallSpec("charge_card", {"amount": 7}),
                    ]
                ),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(
            script, [CHARGE_CARD], interrupt_deadline=timedelta(seconds=5)
        ) as run:
            await run.start_session("charge twice")
            interrupts = await run.sessions.wait_for_pending_interrupts(run.session_id, 2)
            first = next(i for i in interrupts if i.tool_call_id == FIRST_CALL)
            assert await run.sessions.resolve_interrupt(run.session_id, first.interrupt_id, True)
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "succeeded", SECOND_CALL: "rejected"}
            assert [r.details["arguments"] for r in run.tool_runs.invocations("charge_card")] == [
                {"amount": 5}
            ]
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert final_answer(snapshot) == (
                    f"charge_card: charged 5\ncharge_card: {APPROVAL_DEADLINE_PASSED}"
                )

    @contract_rule(ContractRule.CRASH_RECOVERY)
    async def test_an_approval_survives_a_worker_restart(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 5})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [CHARGE_CARD]) as run:
            await run.start_session("charge 5")
            interrupt = await run.sessions.wait_for_pending_interrupt(run.session_id)
            run.kill_workers()
            run.start_worker()
            assert await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "charge_card: charged 5"
            assert run.tool_runs.count("charge_card") == 1

    # --- failures ------------------------------------------------------------------

    @contract_rule(ContractRule.TOOL_ERRORS)
    async def test_a_tool_execution_error_is_recorded_failed_and_shown_to_the_model(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        failing = replace(
            LOOKUP_ORDER,
            behaviour=ToolBehaviour.RAISES_TOOL_ERROR,
            text="order {order_id} not found",
        )
        async with conformance_harness.run(ModelScript(READ_TOOL_TURN), [failing]) as run:
            await run.start_session("where is order 42?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "lookup_order: order 42 not found"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "failed"}
            assert run.tool_runs.count("lookup_order") == 1, "a ToolExecutionError never retries"

    @contract_rule(ContractRule.TOOL_ERRORS)
    async def test_exhausted_call_tool_retries_record_failed_for_a_read(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        broken = replace(LOOKUP_ORDER, behaviour=ToolBehaviour.RAISES_UNEXPECTED)
        async with conformance_harness.run(ModelScript(READ_TOOL_TURN), [broken]) as run:
            await run.start_session("where is order 42?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "failed"}
            assert run.tool_runs.count("lookup_order") == 3
            assert "RecordToolFailure" in await run.step_types()
            assert final_answer(snapshot).startswith("lookup_order: ")
            assert OUTCOME_UNKNOWN_TOOL_RESULT not in final_answer(snapshot)

    @contract_rule(ContractRule.IDEMPOTENCY_KEY)
    async def test_exhausted_call_tool_retries_record_outcome_unknown_for_a_write(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        broken = replace(REFUND_ORDER, behaviour=ToolBehaviour.RAISES_UNEXPECTED)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("refund_order", {"order_id": "42"})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [broken]) as run:
            await run.start_session("refund order 42")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "outcome_unknown"}
            runs = run.tool_runs.invocations("refund_order")
            assert len(runs) == 3
            assert {r.idempotency_key for r in runs} == {f"{run.session_id}/turn-1/{FIRST_CALL}"}
            assert final_answer(snapshot) == f"refund_order: {OUTCOME_UNKNOWN_TOOL_RESULT}"

    @contract_rule(ContractRule.MODEL_FAILURES)
    async def test_a_failed_model_call_fails_the_turn_with_a_note_of_the_tool_calls(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.FAILING_MODEL_CALLS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]),
                ModelTurn(text="never", fail_attempts=ALWAYS),
                ModelTurn(text="recovered"),
            ]
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER]) as run:
            await run.start_session("where is order 42?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert snapshot.state is not None
            assert snapshot.state.last_turn_error
            assert len(run.model_calls("turn-1", 1)) == 3, "RunModel gets 3 attempts"
            note = snapshot.messages[-1]
            assert note.turn_id == "turn-1"
            assert note.role == "user"
            assert note.text is not None
            assert note.text.startswith(TURN_FAILURE_NOTE_HEADER)
            # The note quotes the arguments as the model wrote them, so match around them.
            [line] = [line for line in note.text.splitlines() if line.startswith("- ")]
            assert line.startswith("- lookup_order {")
            assert line.endswith("} -> succeeded: order 42 shipped")
            with checking(ContractRule.UNFINISHED_TURN_MESSAGES):
                # A runner that stored the call as it went also stores its result.
                turn = [m for m in snapshot.messages if m.turn_id == "turn-1"]
                calls = [m.tool_call_id for m in turn if m.role == "assistant" and m.tool_call_id]
                results = [m.tool_call_id for m in turn if m.role == "tool"]
                assert results == calls, "every stored tool call needs its result before the note"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert "turn_failed" in event_types(events, "turn-1")
            assert "RecordTurnFailure" in await run.step_types()

            assert await run.sessions.send_user_message(run.session_id, "try again")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert final_answer(snapshot) == "recovered"
            assert snapshot.state is not None
            assert snapshot.state.last_turn_error is None
            call = run.model_call("turn-2", 0)
            assert TURN_FAILURE_NOTE_HEADER in "\n".join(call.details["history"])
            assert run.tool_runs.count("lookup_order") == 1

    # --- crashes -------------------------------------------------------------------

    async def _kill_during_second_model_call(
        self, conformance_harness: ConformanceHarness, *, after_output: bool
    ) -> None:
        conformance_harness.require(Capability.GATED_MODEL_CALLS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "42"})]),
                ModelTurn(
                    text_from_tool_results=True,
                    gate="model",
                    text_before_gate="partial answer" if after_output else None,
                ),
            ]
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER]) as run:
            await run.start_session("where is order 42?")
            await run.gate("model").wait_until_reached()
            if after_output:
                await run.sessions.read_events(
                    run.session_id,
                    until=lambda events: any(
                        e.type == "text_delta" and "partial" in e.payload for e in events
                    ),
                    description="the partial text delta",
                )
            run.kill_workers()
            run.gate("model").release()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "lookup_order: order 42 shipped"
            assert [c.details["attempt"] for c in run.model_calls("turn-1", 0)] == [1]
            assert [c.details["attempt"] for c in run.model_calls("turn-1", 1)] == [1, 2]
            assert run.tool_runs.count("lookup_order") == 1
            assert await run.step_types() == [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
            ]
            if after_output:
                events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
                deltas = [e for e in events if e.type == "text_delta"]
                partial = next(e for e in deltas if "partial" in e.payload)
                assert partial.attempt == 1
                rerun = [e for e in deltas if e.step_execution_id == partial.step_execution_id]
                assert max(e.attempt for e in rerun) == 2

    @contract_rule(ContractRule.STATELESS_RUNNER)
    async def test_sigkill_during_run_model_before_output_reruns_only_that_call(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        await self._kill_during_second_model_call(conformance_harness, after_output=False)

    @contract_rule(ContractRule.STATELESS_RUNNER)
    async def test_sigkill_during_run_model_after_output_reruns_only_that_call(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        await self._kill_during_second_model_call(conformance_harness, after_output=True)

    async def _kill_during_single_attempt_tool(
        self, conformance_harness: ConformanceHarness, config: dex.FlowConfig | None
    ) -> None:
        charge = replace(CHARGE_CARD, gate="charge", requires_approval=False)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 5})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [charge]) as run:
            await run.start_session("charge 5", config=config)
            await run.gate("charge").wait_until_reached()
            run.kill_workers()
            run.gate("charge").release()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "outcome_unknown"}
            assert final_answer(snapshot) == f"charge_card: {OUTCOME_UNKNOWN_TOOL_RESULT}"
            assert run.tool_runs.count("charge_card") == 1, "a single-attempt tool never reruns"
            history = await read_step_history(run.engine.server_address, run.session_id)
            assert any(
                e.step_type == "CallSingleAttemptTool"
                and e.method is StepMethod.EXECUTE
                and e.outcome is StepOutcome.FAILED
                for e in history
            )
            assert "RecordToolOutcomeUnknown" in await run.step_types()

    @contract_rule(ContractRule.CRASH_RECOVERY)
    async def test_sigkill_during_call_single_attempt_tool_records_outcome_unknown(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        await self._kill_during_single_attempt_tool(conformance_harness, None)

    @contract_rule(ContractRule.CRASH_RECOVERY)
    async def test_sigkill_during_call_single_attempt_tool_under_async_durability(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        await self._kill_during_single_attempt_tool(
            conformance_harness, dex.FlowConfig(step_durability=dex.StepDurability.ASYNC)
        )

    @contract_rule(ContractRule.IDEMPOTENCY_KEY)
    async def test_sigkill_during_call_tool_retries_with_the_same_idempotency_key(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        refund = replace(REFUND_ORDER, gate="refund")
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("refund_order", {"order_id": "42"})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [refund]) as run:
            await run.start_session("refund order 42")
            await run.gate("refund").wait_until_reached()
            run.kill_workers()
            run.gate("refund").release()
            run.start_worker()
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert final_answer(snapshot) == "refund_order: refunded 42"
            runs = run.tool_runs.invocations("refund_order")
            assert len(runs) == 2
            assert {r.idempotency_key for r in runs} == {f"{run.session_id}/turn-1/{FIRST_CALL}"}
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "succeeded"}
            assert json.loads(json.dumps(runs[0].details))["attempt"] == 1
