"""Conformance scenarios of the runner capabilities of 0.2.0: a tool that asks the user a
question, plan mode with a forced tool choice, and the model chosen per session.

``ConformanceSuite`` inherits them. Each needs an opt-in capability
(``TOOL_INPUT_REQUESTS``, ``PLANNING_TOOL_CHOICE``, ``SESSION_MODELS``) and skips, with
the adapter's reason, where the adapter declares it unsupported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from dex_agents.runner import QUESTION_DECLINED
from dex_agents.testing import (
    DEFAULT_SCENARIO_MODEL,
    Invocation,
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ScenarioTool,
    ToolCallSpec,
)
from dex_agents.values import AgentSnapshot, AgentToolCallStatus, InterruptKind, ToolEffect
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import assert_turn_succeeded, final_answer, finished_statuses
from dex_agents_conformance.harness import ConformanceHarness, ScenarioRun
from dex_agents_conformance.long_sessions import COMPACTION_WINDOW_TOKENS
from dex_agents_conformance.rules import ContractRule, checking, contract_rule
from dex_agents_conformance.tools import LOOKUP_ORDER, LOOKUP_STOCK

WRITE_TODOS = "write_todos"
LARGE_MODEL = "scripted-large"
SMALL_MODEL = "scripted-small"

PAINT_FENCE = ScenarioTool(
    "paint_fence",
    ToolEffect.IDEMPOTENT_WRITE,
    description="Paint the fence in the colour the user picks.",
    text="painted {answer}",
    question="Which colour?",
    choices=("red", "blue"),
    continuation="paint_fence-colour",
)
BOOK_PAINTER = ScenarioTool(
    "book_painter",
    ToolEffect.IDEMPOTENT_WRITE,
    description="Book the painter on the day the user picks.",
    text="booked {answer}",
    question="Which day?",
    continuation="book_painter-day",
)


def _todos(*tasks: tuple[str, str]) -> dict[str, object]:
    return {"todos": [{"content": content, "status": status} for content, status in tasks]}


def _recorded(call: Invocation, key: str, how: str) -> Any:
    """A field of a model call record that a capability asks the scripted model to write."""
    if key not in call.details:
        raise AssertionError(
            f"the model call of {call.details['turn_id']} at position"
            f" {call.details['position']} recorded no {key!r}: {how}"
        )
    return call.details[key]


def _model_of(call: Invocation) -> str:
    return _recorded(
        call,
        "model",
        "the scripted model records its name (play_scripted_model_call(model=...)), and the"
        " factory builds one per ScenarioSession.session_models name",
    )


def _models_of_turn(run: ScenarioRun, turn_id: str) -> list[str]:
    calls = sorted(run.model_calls(turn_id), key=lambda c: c.details["position"])
    return [_model_of(call) for call in calls]


def _offer(run: ScenarioRun, turn_id: str, position: int) -> tuple[list[str], str]:
    """The tools a model call offered and its tool choice."""
    how = (
        "the scripted model records what it was offered"
        " (play_scripted_model_call(offered_tools=..., tool_choice=...))"
    )
    call = run.model_call(turn_id, position)
    return (
        sorted(_recorded(call, "offered_tools", how)),
        _recorded(call, "tool_choice", how),
    )


async def _wait_for_questions(run: ScenarioRun, count: int, turn: int = 1) -> AgentSnapshot:
    """The snapshot once ``count`` interrupts are pending or turn ``turn`` ended.

    A runner that loses the question ends the turn instead; the scenario then fails at
    once, naming its rule, instead of waiting for a timeout.
    """
    return await run.sessions.wait_for_snapshot(
        run.session_id,
        lambda s: (
            len(s.pending_interrupts) >= count
            or (
                s.state is not None
                and s.state.turn_count >= turn
                and s.state.active_turn_id is None
            )
        ),
        description=f"{count} pending question(s) or the end of turn {turn}",
    )


class RunnerCapabilityScenarios:
    """Tool questions, a forced planning tool choice, and per-session models."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    # --- a tool asks the user --------------------------------------------------------

    @contract_rule(ContractRule.TOOL_INPUT_REQUESTED)
    async def test_two_tools_of_one_response_ask_at_once_and_each_rerun_gets_its_own_answer(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """Both tool Steps ask without the interrupt lock, so both questions are pending at
        once; each call reruns with its own answer and its question's continuation."""
        conformance_harness.require(Capability.TOOL_INPUT_REQUESTS, Capability.PARALLEL_TOOL_CALLS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("paint_fence"), ToolCallSpec("book_painter")]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [PAINT_FENCE, BOOK_PAINTER]) as run:
            await run.start_session("paint the fence and book the painter")
            snapshot = await _wait_for_questions(run, 2)
            asked = {
                i.interrupt_id: (i.kind, i.tool_call_id, i.question, i.choices)
                for i in snapshot.pending_interrupts
            }
            assert asked == {
                "call-0-0-input-1": (
                    InterruptKind.QUESTION,
                    "call-0-0",
                    "Which colour?",
                    ("red", "blue"),
                ),
                "call-0-1-input-1": (InterruptKind.QUESTION, "call-0-1", "Which day?", None),
            }, "each tool's ToolInputRequested must reach the session with its question"
            assert run.tool_runs.count("paint_fence") == 0, "a tool asks before any effect"
            assert run.tool_runs.count("book_painter") == 0, "a tool asks before any effect"
            # Answered in the other order: each answer belongs to its own call.
            assert await run.sessions.answer_question(run.session_id, "call-0-1-input-1", "tuesday")
            assert await run.sessions.answer_question(run.session_id, "call-0-0-input-1", "red")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            assert snapshot.pending_interrupts == (), "a rerun must get the answer, not ask again"
            assert final_answer(snapshot) == (
                "paint_fence: painted red\nbook_painter: booked tuesday"
            )
            [painted] = run.tool_runs.invocations("paint_fence")
            [booked] = run.tool_runs.invocations("book_painter")
            assert painted.details["input_answers"] == ["red"]
            assert booked.details["input_answers"] == ["tuesday"]
            assert painted.details["input_continuation"] == "paint_fence-colour", (
                "the rerun reads the question's continuation in tool_call.input_continuation"
            )
            assert booked.details["input_continuation"] == "book_painter-day"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {
                "call-0-0": AgentToolCallStatus.SUCCEEDED.value,
                "call-0-1": AgentToolCallStatus.SUCCEEDED.value,
            }

    @contract_rule(ContractRule.TOOL_INPUT_REQUESTED)
    async def test_a_declined_tool_question_rejects_the_call_and_the_tool_never_runs(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.TOOL_INPUT_REQUESTS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("paint_fence", {"side": "north"})]),
                ModelTurn(text_from_tool_results=True),
                ModelTurn(tool_calls=[ToolCallSpec("paint_fence", {"side": "south"}, "again")]),
                ModelTurn(text_from_tool_results=True),
            ]
        )
        async with conformance_harness.run(script, [PAINT_FENCE]) as run:
            await run.start_session("paint the north side")
            snapshot = await _wait_for_questions(run, 1)
            [question] = snapshot.pending_interrupts
            assert question.interrupt_id == "call-0-0-input-1"
            assert await run.sessions.resolve_interrupt(
                run.session_id, question.interrupt_id, False
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {"call-0-0": AgentToolCallStatus.REJECTED.value}
            assert run.tool_runs.count("paint_fence") == 0, "a declined question runs no tool"
            assert not await run.sessions.answer_question(
                run.session_id, question.interrupt_id, "blue"
            ), "a declined question takes no later answer"
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert final_answer(snapshot) == f"paint_fence: {QUESTION_DECLINED}"

            # A decline with a message: the model reads the message; the next call asks anew.
            assert await run.sessions.send_user_message(run.session_id, "the south side then")
            snapshot = await _wait_for_questions(run, 1, turn=2)
            [question] = snapshot.pending_interrupts
            assert question.interrupt_id == "again-input-1"
            assert await run.sessions.resolve_interrupt(
                run.session_id, question.interrupt_id, False, "not this week"
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert_turn_succeeded(snapshot)
            assert run.tool_runs.count("paint_fence") == 0
            if Capability.REJECTION_MESSAGE_TO_MODEL in conformance_harness.adapter.capabilities:
                assert final_answer(snapshot) == "paint_fence: not this week"

    # --- plan mode with a forced tool choice -------------------------------------------

    @contract_rule(ContractRule.PLANS)
    async def test_planning_tool_choice_required_forces_write_todos_until_a_draft_exists(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        """``required`` forces a tool call on a planning turn's first model call while no
        draft exists; a chat turn, the planning turn's later calls, feedback on a draft and
        the executing turn keep ``auto``."""
        conformance_harness.require(
            Capability.BUILT_IN_TOOLS, Capability.PLAN_MODE, Capability.PLANNING_TOOL_CHOICE
        )
        script = ModelScript(
            [
                ModelTurn(text="hello"),
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec(WRITE_TODOS, _todos(("look up order 8", "pending")), "p-1")
                    ]
                ),
                ModelTurn(text="plan ready"),
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec(WRITE_TODOS, _todos(("look up order 9", "pending")), "p-2")
                    ]
                ),
                ModelTurn(text="plan revised"),
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "9"}, "run-1")]),
                ModelTurn(
                    tool_calls=[
                        ToolCallSpec(WRITE_TODOS, _todos(("look up order 9", "completed")), "d-1")
                    ]
                ),
                ModelTurn(text="done"),
            ]
        )
        session = ScenarioSession(
            "replaced-by-the-harness",
            built_in_tools=(WRITE_TODOS,),
            plan_mode_enabled=True,
            planning_tool_choice="required",
        )
        async with conformance_harness.run(script, [LOOKUP_ORDER], session=session) as run:
            await run.start_session("hi")
            await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert await run.sessions.send_user_message(
                run.session_id, "plan order 8", plan_mode=True
            )
            planned = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert_turn_succeeded(planned)
            assert planned.plan is not None
            assert (planned.plan.revision, planned.plan.status) == (1, "draft")
            assert await run.sessions.send_user_message(run.session_id, "order 9, not 8")
            revised = await run.sessions.wait_for_completed_turns(run.session_id, 3)
            assert revised.plan is not None
            assert (revised.plan.revision, revised.plan.status) == (2, "draft")
            assert await run.sessions.execute_plan(run.session_id, 2)
            executed = await run.sessions.wait_for_completed_turns(run.session_id, 4)
            assert_turn_succeeded(executed)
            assert executed.plan is not None
            assert (executed.plan.revision, executed.plan.status) == (3, "completed")
            assert final_answer(executed) == "done"
            assert run.tool_runs.count("lookup_order") == 1

            everything = sorted([LOOKUP_ORDER.name, WRITE_TODOS])
            with checking(ContractRule.PLANS):
                assert _offer(run, "turn-1", 0) == (everything, "auto"), "a chat turn is not forced"
                assert _offer(run, "turn-2", 0) == ([WRITE_TODOS], "required"), (
                    "the first model call of a planning turn without a draft must force a tool"
                    " call (the factory passes ScenarioSession.planning_tool_choice)"
                )
                assert _offer(run, "turn-2", 1) == ([WRITE_TODOS], "auto"), (
                    "only the planning turn's first model call is forced"
                )
                assert _offer(run, "turn-3", 0) == ([WRITE_TODOS], "auto"), (
                    "feedback on a draft plans again without forcing a tool call"
                )
                assert _offer(run, "turn-4", 0) == (everything, "auto"), (
                    "the executing turn offers every tool"
                )

    # --- the model chosen per session --------------------------------------------------

    @contract_rule(ContractRule.SESSION_SETTINGS)
    async def test_session_settings_choose_the_model_and_an_update_applies_at_the_next_turn(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.SESSION_MODELS, Capability.GATED_MODEL_CALLS)
        script = ModelScript(
            [
                ModelTurn(tool_calls=[ToolCallSpec("lookup_order", {"order_id": "1"})]),
                ModelTurn(text_from_tool_results=True),
                ModelTurn(tool_calls=[ToolCallSpec("lookup_stock", {"sku": "lamp"}, "stock-1")]),
                ModelTurn(text_from_tool_results=True, gate="answer"),
                ModelTurn(text="three"),
                ModelTurn(text="four"),
            ]
        )
        session = ScenarioSession(
            "replaced-by-the-harness", session_models=(LARGE_MODEL, SMALL_MODEL)
        )
        tools = [LOOKUP_ORDER, LOOKUP_STOCK]
        async with conformance_harness.run(script, tools, session=session) as run:
            await run.start_session("where is order 1?", session_settings={"model": LARGE_MODEL})
            first = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(first)
            assert final_answer(first) == "lookup_order: order 1 shipped"
            assert _models_of_turn(run, "turn-1") == [LARGE_MODEL, LARGE_MODEL], (
                "every model call of the turn uses the model the session settings choose"
            )

            assert await run.sessions.send_user_message(run.session_id, "and a lamp?")
            await run.gate("answer").wait_until_reached()
            # An update while the turn runs applies from the next turn only, also to a
            # model call that a Worker crash reruns.
            assert await run.sessions.update_session_settings(
                run.session_id, {"model": SMALL_MODEL}
            )
            run.kill_workers()
            run.gate("answer").release()
            run.start_worker()
            second = await run.sessions.wait_for_completed_turns(run.session_id, 2)
            assert_turn_succeeded(second)
            assert final_answer(second) == "lookup_stock: lamp in stock"
            rerun = run.model_calls("turn-2", 1)
            assert [c.details["attempt"] for c in rerun] == [1, 2]
            assert [_model_of(c) for c in [*run.model_calls("turn-2", 0), *rerun]] == [
                LARGE_MODEL,
                LARGE_MODEL,
                LARGE_MODEL,
            ], "a running turn keeps the settings it started with (turn.session_settings)"

            assert await run.sessions.send_user_message(run.session_id, "three?")
            third = await run.sessions.wait_for_completed_turns(run.session_id, 3)
            assert final_answer(third) == "three"
            assert _models_of_turn(run, "turn-3") == [SMALL_MODEL]

            assert await run.sessions.update_session_settings(run.session_id, {})
            assert await run.sessions.send_user_message(run.session_id, "four?")
            fourth = await run.sessions.wait_for_completed_turns(run.session_id, 4)
            assert final_answer(fourth) == "four"
            assert _models_of_turn(run, "turn-4") == [DEFAULT_SCENARIO_MODEL], (
                "without a model setting the runner uses its default model"
            )
            assert fourth.session_settings == {}

    @contract_rule(ContractRule.SESSION_SETTINGS)
    async def test_summary_calls_use_the_model_the_session_settings_choose(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        conformance_harness.require(Capability.SESSION_MODELS, Capability.COMPACTION)
        turns = 16
        script = ModelScript([ModelTurn(text=f"answer {n}") for n in range(1, turns + 1)])
        session = ScenarioSession(
            "replaced-by-the-harness",
            compaction_context_window_tokens=COMPACTION_WINDOW_TOKENS,
            retained_message_limit=4,
            message_window_size=4,
            message_chunk_size=2,
            session_models=(LARGE_MODEL, SMALL_MODEL),
        )
        async with conformance_harness.run(script, session=session) as run:
            await run.start_session("question 1", session_settings={"model": LARGE_MODEL})
            for turn in range(2, turns + 1):
                assert await run.sessions.send_user_message(run.session_id, f"question {turn}")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, turns)
            assert_turn_succeeded(snapshot)
            assert snapshot.context_summary is not None, "the session compacted"
            summaries = run.summary_calls()
            assert summaries, "the scripted model records summary calls (play_scripted_summary)"
            models = [call.details.get("model") for call in summaries]
            assert models == [LARGE_MODEL] * len(summaries), (
                "summarize_context uses the model request.session_settings choose"
                " (play_scripted_summary(model=...) records it)"
            )
            assert set(_all_models(run, turns)) == {LARGE_MODEL}


def _all_models(run: ScenarioRun, turns: int) -> Sequence[str]:
    return [model for n in range(1, turns + 1) for model in _models_of_turn(run, f"turn-{n}")]
