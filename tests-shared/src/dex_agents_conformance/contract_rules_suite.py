"""Scenarios for the rules of the runner contract that a runner can break, each check named.

``ConformanceSuite`` inherits them. Every check sits in ``checking(rule)``, so a
failure ends with ``contract rule <name>: ...`` (see ``dex_agents_conformance.rules``);
the suite's own mutation tests run one deliberately broken runner per rule
(``dex_agents_conformance.mutants``) and expect exactly that name.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import ClassVar

import pytest

from dex_agents.runner import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT, default_requires_approval
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ScenarioTool,
    ToolBehaviour,
    ToolCallSpec,
)
from dex_agents.values import AgentMessage, AgentSnapshot, AgentToolCallStatus, ToolEffect
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import (
    assert_turn_succeeded,
    event_types,
    final_answer,
    finished_statuses,
)
from dex_agents_conformance.harness import ConformanceHarness, ScenarioRun
from dex_agents_conformance.rules import ContractRule, checking, contract_rule
from dex_agents_conformance.tools import CHARGE_CARD, LOOKUP_ORDER, LOOKUP_STOCK, REFUND_ORDER

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
"""Events the session itself writes; a runner writes text deltas and its own events."""

TWO_ROUNDS = ModelScript(
    [
        ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "7"})]),
        ModelTurn(tool_calls=[ToolCallSpec("lookup_stock", {"sku": "lamp"})]),
        ModelTurn(text_from_tool_results=True),
        ModelTurn(text="you are welcome"),
    ]
)
"""One turn with two rounds of one tool call each, then a plain second turn."""


def _shown(messages: list[AgentMessage]) -> list[AgentMessage]:
    """Messages a UI shows: without stored-only items (assistant messages with nothing set)."""
    return [
        m for m in messages if not (m.role == "assistant" and not m.text and m.tool_call_id is None)
    ]


def _turn(snapshot: AgentSnapshot, turn_id: str) -> list[AgentMessage]:
    return [m for m in snapshot.messages if m.turn_id == turn_id]


async def _wait_for_interrupt_or_turn_end(run: ScenarioRun, turns: int) -> AgentSnapshot:
    """The snapshot once an interrupt is pending or ``turns`` turns ended, whichever first.

    A broken runner may end the turn instead of raising the interrupt; the scenario
    then fails at once, naming its rule, instead of waiting for a timeout.
    """
    return await run.sessions.wait_for_snapshot(
        run.session_id,
        lambda s: (
            bool(s.pending_interrupts)
            or (
                s.state is not None
                and s.state.turn_count >= turns
                and s.state.active_turn_id is None
            )
        ),
        description=f"a pending interrupt or {turns} finished turn(s)",
    )


class ContractRuleScenarios:
    """The runner contract, rule by rule; see the module docstring."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    async def test_contract_rules_of_a_turn_with_two_tool_rounds(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """IDs, Steps, events, transcript, results, usage, replay and keys of one turn."""
        async with conformance_harness.run(TWO_ROUNDS, [LOOKUP_ORDER, LOOKUP_STOCK]) as run:
            await run.start_session("order 7 and a lamp?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")

            with checking(ContractRule.TOOL_CALL_IDS):
                deferred = [e.payload_data() for e in events if e.type == "tool_call_deferred"]
                assert [(d["tool_call_id"], d["tool_name"]) for d in deferred] == [
                    ("call-0-0", "lookup_order"),
                    ("call-1-0", "lookup_stock"),
                ], "the session's call IDs must be the model's own"
            with checking(ContractRule.NO_TOOL_IN_MODEL_STEP):
                assert run.tool_runs.count("lookup_order") == 1
                assert run.tool_runs.count("lookup_stock") == 1
                assert await run.step_types() == [
                    "StartAgentSession",
                    "RunModel",
                    "CallTool",
                    "ResumeTurn",
                    "RunModel",
                    "CallTool",
                    "ResumeTurn",
                    "RunModel",
                ]
            with checking(ContractRule.SESSION_EVENTS):
                session_events = [t for t in event_types(events, "turn-1") if t in SESSION_EVENTS]
                one_round = [
                    "usage_recorded",
                    "tool_call_deferred",
                    "tool_call_started",
                    "tool_call_finished",
                ]
                assert session_events == [
                    "turn_started",
                    *one_round,
                    *one_round,
                    "usage_recorded",
                    "turn_completed",
                ]
            with checking(ContractRule.STORED_TRANSCRIPT):
                shown = _shown(_turn(snapshot, "turn-1"))
                assert [(m.role, m.tool_call_id) for m in shown] == [
                    ("user", None),
                    ("assistant", "call-0-0"),
                    ("tool", "call-0-0"),
                    ("assistant", "call-1-0"),
                    ("tool", "call-1-0"),
                    ("assistant", None),
                ]
                user, call_7, result_7, call_lamp, result_lamp, answer = shown
                assert user.text == "order 7 and a lamp?"
                for call, name, arguments in (
                    (call_7, "lookup_order", {"order_id": "7"}),
                    (call_lamp, "lookup_stock", {"sku": "lamp"}),
                ):
                    assert call.tool_name == name
                    assert json.loads(call.tool_arguments or "null") == arguments
                    assert call.tool_output is None
                for result, name, output in (
                    (result_7, "lookup_order", "order 7 shipped"),
                    (result_lamp, "lookup_stock", "lamp in stock"),
                ):
                    assert result.tool_name == name
                    assert output in (result.tool_output or "")
                    assert result.tool_arguments is None
                    assert not result.text
                assert answer.text == final_answer(snapshot)
            with checking(ContractRule.TOOL_RESULTS):
                assert run.model_call("turn-1", 1).details["tool_results"] == {
                    "call-0-0": "order 7 shipped"
                }
                assert final_answer(snapshot) == (
                    "lookup_order: order 7 shipped\nlookup_stock: lamp in stock"
                )
            with checking(ContractRule.USAGE):
                usage = [e.payload_data() for e in events if e.type == "usage_recorded"]
                assert len(usage) == 3
                assert snapshot.usage.model_calls == 3, "each outcome reports its own call only"
            with checking(ContractRule.IDEMPOTENCY_KEY):
                runs = [
                    *run.tool_runs.invocations("lookup_order"),
                    *run.tool_runs.invocations("lookup_stock"),
                ]
                assert [(r.idempotency_key, r.details["attempt"]) for r in runs] == [
                    (f"{run.session_id}/turn-1/call-0-0", 1),
                    (f"{run.session_id}/turn-1/call-1-0", 1),
                ]

            assert await run.sessions.send_user_message(run.session_id, "thanks")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert_turn_succeeded(snapshot)
            with checking(ContractRule.REPLAY_HISTORY):
                history = "\n".join(run.model_call("turn-2", 0).details["history"])
                for text in ("order 7 and a lamp?", "order 7 shipped", "lamp in stock", "thanks"):
                    assert text in history, f"turn-2's model call was not given {text!r}"
                assert final_answer(snapshot) == "you are welcome"

    @contract_rule(ContractRule.FRAMEWORK_EFFECTS)
    async def test_framework_declared_effects_are_honoured_without_session_policies(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """Each tool's effect and approval as the framework declares them, no session policy."""
        refund = replace(REFUND_ORDER, requires_approval=True)
        charge = replace(CHARGE_CARD, requires_approval=False)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "1"})]),
                ModelTurn(tool_calls=[ToolCallSpec("refund_order", {"order_id": "1"})]),
                ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 3})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER, refund, charge]) as run:
            overridden = sorted(set(run.flow.options.tool_policies) & {"lookup_order", "refund"})
            assert not overridden, (
                f"the factory sets session tool_policies for {overridden}, which override the"
                " framework's own declarations; build the tools with the framework's"
                " declaration (declare_tool_effect) and pass no scenario_tool_policies"
            )
            await run.start_session("look up, refund, charge")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            pending = [(i.tool_name, i.kind.value) for i in snapshot.pending_interrupts]
            assert pending == [("refund_order", "approval")], (
                "only refund_order declares requires_approval=True"
            )
            [interrupt] = snapshot.pending_interrupts
            assert await run.sessions.resolve_interrupt(
                run.session_id, interrupt.interrupt_id, True
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            deferred = {
                d["tool_name"]: (d["effect"], d["requires_approval"])
                for d in (e.payload_data() for e in events if e.type == "tool_call_deferred")
            }
            assert deferred == {
                "lookup_order": ("read", False),
                "refund_order": ("idempotent_write", True),
                "charge_card": ("non_idempotent_write", False),
            }
            steps = await run.step_types()
            assert steps.count("CallTool") == 2
            assert steps.count("CallSingleAttemptTool") == 1
            assert final_answer(snapshot) == (
                "lookup_order: order 1 shipped\nrefund_order: refunded 1\ncharge_card: charged 3"
            )

    @contract_rule(ContractRule.UNKNOWN_TOOLS)
    async def test_a_call_of_an_unknown_tool_gets_the_session_default_policy(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """A tool the runner does not have: the session default's effect and approval, as
        ``dex_agents.runner.call_policy`` gives them, then a failure the model reads."""
        conformance_harness.require(Capability.UNOFFERED_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("cancel_subscription", {"plan": "pro"})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER]) as run:
            default = run.flow.options.default_tool_effect
            approval = default_requires_approval(default)
            await run.start_session("cancel my subscription")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            pending = [(i.tool_name, i.kind.value) for i in snapshot.pending_interrupts]
            assert pending == ([("cancel_subscription", "approval")] if approval else []), (
                f"the session default ({default.value}) asks {'' if approval else 'no '}approval,"
                " and a tool the runner does not have gets the session default"
            )
            if approval:
                [interrupt] = snapshot.pending_interrupts
                assert await run.sessions.resolve_interrupt(
                    run.session_id, interrupt.interrupt_id, True
                )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            [deferred] = [e.payload_data() for e in events if e.type == "tool_call_deferred"]
            assert deferred == {
                "tool_call_id": "call-0-0",
                "tool_name": "cancel_subscription",
                "effect": default.value,
                "requires_approval": approval,
            }
            assert finished_statuses(events) == {"call-0-0": AgentToolCallStatus.FAILED.value}
            tool, _, result = final_answer(snapshot).partition(": ")
            assert tool == "cancel_subscription"
            assert "cancel_subscription" in result, "the failure names the unknown tool"
            assert run.tool_runs.count("lookup_order") == 0

    @contract_rule(ContractRule.BUILT_IN_TOOLS)
    async def test_built_in_tools_ask_user_and_durable_wait_run_through_the_runner(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.BUILT_IN_TOOLS)
        ask = ToolCallSpec("ask_user", {"question": "Which colour?", "choices": ["red", "blue"]})
        wait = ToolCallSpec("durable_wait", {"duration_seconds": 1, "reason": "cool down"}, "w-1")
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ask]),
                ModelTurn(text_from_tool_results=True),
                ModelTurn(tool_calls=[wait]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(
            script, built_in_tools=["ask_user", "durable_wait"]
        ) as run:
            await run.start_session("paint it")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            asked = [(i.tool_call_id, i.kind.value) for i in snapshot.pending_interrupts]
            assert asked == [("call-0-0", "question")], "ask_user must reach the session"
            assert await run.sessions.answer_question(run.session_id, "call-0-0", "blue")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            assert final_answer(snapshot) == 'ask_user: {"status":"answered","answer":"blue"}'

            assert await run.sessions.send_user_message(run.session_id, "now wait")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert_turn_succeeded(snapshot)
            assert final_answer(snapshot) == (
                'durable_wait: {"status":"completed","waited_seconds":1,"reason":"cool down"}'
            )
            assert "AwaitTimer" in await run.step_types()

    @contract_rule(ContractRule.BUILT_IN_TOOLS)
    async def test_a_question_supersedes_the_later_calls_of_its_response(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """With ``question_supersedes_later_calls``, the calls after an ``ask_user`` call in
        one response are rejected unrun; the call before it runs. The runner must return
        the calls in the model's order for the session to tell which come after."""
        conformance_harness.require(Capability.BUILT_IN_TOOLS)
        calls = [
            ToolCallSpec("lookup_order", {"order_id": "3"}),
            ToolCallSpec("ask_user", {"question": "Which colour?"}),
            ToolCallSpec("durable_wait", {"duration_seconds": 3600, "reason": "later"}),
            ToolCallSpec("lookup_stock", {"sku": "lamp"}),
        ]
        script = ModelScript([ModelTurn(tool_calls=calls), ModelTurn(text_from_tool_results=True)])
        session = ScenarioSession(
            "replaced-by-the-harness",
            built_in_tools=("ask_user", "durable_wait"),
            question_supersedes_later_calls=True,
        )
        async with conformance_harness.run(
            script, [LOOKUP_ORDER, LOOKUP_STOCK], session=session
        ) as run:
            await run.start_session("order 3, a colour, then a lamp")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            asked = [(i.tool_call_id, i.kind.value) for i in snapshot.pending_interrupts]
            assert asked == [("call-0-1", "question")], "ask_user must reach the session"
            for call_id in ("call-0-2", "call-0-3"):
                record = await run.sessions.wait_for_tool_call(
                    run.session_id, call_id, AgentToolCallStatus.REJECTED
                )
                assert record.cancellation_reason == "superseded_by_user_input", (
                    "the factory must pass ScenarioSession.question_supersedes_later_calls"
                )
            assert await run.sessions.answer_question(run.session_id, "call-0-1", "blue")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {
                "call-0-0": AgentToolCallStatus.SUCCEEDED.value,
                "call-0-1": AgentToolCallStatus.SUCCEEDED.value,
                "call-0-2": AgentToolCallStatus.REJECTED.value,
                "call-0-3": AgentToolCallStatus.REJECTED.value,
            }
            assert run.tool_runs.count("lookup_order") == 1
            assert run.tool_runs.count("lookup_stock") == 0, "a superseded call never runs"
            assert "AwaitTimer" not in await run.step_types()
            answer = final_answer(snapshot).splitlines()
            assert answer[:2] == [
                "lookup_order: order 3 shipped",
                'ask_user: {"status":"answered","answer":"blue"}',
            ]
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert answer[2:] == [
                    f"durable_wait: {TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT}",
                    f"lookup_stock: {TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT}",
                ]

    @contract_rule(ContractRule.TOOL_INPUT_REQUESTED)
    async def test_a_tool_input_request_asks_the_user_and_reruns_with_the_answer(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.TOOL_INPUT_REQUESTS)
        paint = ScenarioTool(
            "paint_fence",
            ToolEffect.IDEMPOTENT_WRITE,
            description="Paint the fence in the colour the user picks.",
            text="painted {answer}",
            question="Which colour?",
            choices=("red", "blue"),
            continuation="paint_fence-colour",
        )
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("paint_fence", {})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [paint]) as run:
            await run.start_session("paint the fence")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            [question] = snapshot.pending_interrupts
            assert (question.interrupt_id, question.kind.value) == ("call-0-0-input-1", "question")
            assert (question.question, question.choices) == ("Which colour?", ("red", "blue"))
            assert run.tool_runs.count("paint_fence") == 0, "a tool asks before any effect"
            assert await run.sessions.answer_question(run.session_id, question.interrupt_id, "blue")
            snapshot = await _wait_for_interrupt_or_turn_end(run, 1)
            assert snapshot.pending_interrupts == (), "the rerun must get the answer, not ask again"
            assert_turn_succeeded(snapshot)
            assert final_answer(snapshot) == "paint_fence: painted blue"
            [ran] = run.tool_runs.invocations("paint_fence")
            assert ran.details["input_answers"] == ["blue"]
            assert ran.details["input_continuation"] == "paint_fence-colour", (
                "the rerun reads the question's continuation in tool_call.input_continuation"
            )

    @contract_rule(ContractRule.TOOL_ERRORS)
    async def test_tool_errors_reach_the_session_unchanged(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """A ``ToolExecutionError`` records ``failed`` once; a first unexpected error retries."""
        flaky = replace(LOOKUP_STOCK, fail_attempts=1)
        refused = replace(
            LOOKUP_ORDER,
            behaviour=ToolBehaviour.RAISES_TOOL_ERROR,
            text="order {order_id} not found",
        )
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "5"})]),
                ModelTurn(tool_calls=[ToolCallSpec("lookup_stock", {"sku": "desk"})]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [refused, flaky]) as run:
            await run.start_session("order 5 and a desk?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {
                "call-0-0": AgentToolCallStatus.FAILED.value,
                "call-1-0": AgentToolCallStatus.SUCCEEDED.value,
            }
            assert run.tool_runs.count("lookup_order") == 1, "a ToolExecutionError never retries"
            assert [r.details["attempt"] for r in run.tool_runs.invocations("lookup_stock")] == [
                1,
                2,
            ], "an unexpected error is raised, so CallTool retries the read"
            assert final_answer(snapshot) == (
                "lookup_order: order 5 not found\nlookup_stock: desk in stock"
            )
