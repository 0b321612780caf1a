"""Built-in tools end to end: ask_user, durable_wait, and a tool that asks the user first."""

from __future__ import annotations

import json
from datetime import timedelta

import dex
from core_session_support import ScriptRunner, calls_then_answer, session_id

from dex_agents import (
    AgentToolCallStatus,
    InterruptKind,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents._texts import QUESTION_DEADLINE_PASSED
from dex_agents.runner import QUESTION_DECLINED, ToolExecutionResult, ToolInputRequested
from dex_agents.testing import read_step_history
from dex_agents.values import AnswerQuestionInput, ResolveInterruptInput


async def test_ask_user_answered_with_refused_and_duplicate_answers(harness_factory) -> None:
    runner = ScriptRunner(
        calls_then_answer(
            (
                "q1",
                "ask_user",
                {"question": "Which size?", "choices": ["S", "M"], "allows_free_text": False},
            )
        )
    )
    flow = create_agent_session_flow(runner, "AskAgent", built_in_tools=("ask_user",))
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "order a shirt")
        snapshot = await harness.wait_for(flow, sid, lambda s: bool(s.pending_interrupts))
        (interrupt,) = snapshot.pending_interrupts
        assert interrupt.interrupt_id == "q1"
        assert interrupt.kind is InterruptKind.QUESTION
        assert interrupt.question == "Which size?"
        assert interrupt.choices == ("S", "M")
        assert interrupt.allows_free_text is False
        assert snapshot.tool_calls[0].status is AgentToolCallStatus.AWAITING_ANSWER
        assert runner.model_calls[0].enabled_built_in_tools == ("ask_user",)

        async def answer(text: str, interrupt_id: str = "q1") -> bool:
            return await harness.sessions(flow).answer_question(sid, interrupt_id, text)

        assert not await answer("XL")  # outside choices
        assert not await answer("   ")  # blank
        assert not await answer("S", "nope")  # not pending
        assert not await harness.resolve(
            flow, sid, ResolveInterruptInput("q1", True)
        )  # questions are not approved
        assert await answer("M")
        assert not await answer("S")  # no longer pending
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)

    assert snapshot.messages[-1].text == 'q1=succeeded:{"status":"answered","answer":"M"}'
    raised = json.loads(next(e for e in events if e.type == "interrupt_raised").payload)
    assert raised == {
        "interrupt_id": "q1",
        "kind": "question",
        "tool_call_id": "q1",
        "tool_name": "ask_user",
        "deadline": None,
        "question": "Which size?",
        "choices": ["S", "M"],
        "allows_free_text": False,
    }
    resolved = json.loads(next(e for e in events if e.type == "interrupt_resolved").payload)
    assert resolved["answered"] is True
    assert resolved["approved"] is True
    steps = [
        e.step_type
        for e in history
        if e.method.value == "execute" and e.outcome.value == "completed"
    ]
    assert "AwaitQuestionAnswer" in steps
    assert "CallTool" not in steps


async def test_ask_user_declined_deadline_and_invalid_arguments(harness_factory) -> None:
    runner = ScriptRunner(
        calls_then_answer(
            ("q1", "ask_user", {"question": "Proceed?"}),
            ("q2", "ask_user", {"question": "Really?", "choices": None, "allows_free_text": None}),
            ("q3", "ask_user", {"question": "  "}),
            ("w1", "durable_wait", {"duration_seconds": 0, "reason": "too short"}),
        )
    )
    flow = create_agent_session_flow(
        runner,
        "DeclineAgent",
        built_in_tools=("ask_user", "durable_wait"),
        interrupt_deadline=timedelta(seconds=3),
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "ask me")
        await harness.wait_for(flow, sid, lambda s: len(s.pending_interrupts) == 2)
        decline = ResolveInterruptInput(interrupt_id="q1", approved=False, rejection_message=None)
        assert await harness.resolve(flow, sid, decline)
        snapshot = await harness.wait_for_turns(flow, sid, 1)

    assert snapshot.messages[-1].text == " | ".join(
        [
            f"q1=rejected:{QUESTION_DECLINED}",
            f"q2=rejected:{QUESTION_DEADLINE_PASSED}",
            "q3=failed:invalid ask_user arguments: question must be a non-blank string",
            "w1=failed:invalid durable_wait arguments: duration_seconds must be from 1 to 31536000",
        ]
    )


async def test_durable_wait_ends_early_with_skip_timer(harness_factory) -> None:
    runner = ScriptRunner(
        calls_then_answer(
            ("w1", "durable_wait", {"duration_seconds": 86400, "reason": "check tomorrow"})
        )
    )
    flow = create_agent_session_flow(runner, "WaitAgent", built_in_tools=("durable_wait",))
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "wait a day")
        snapshot = await harness.wait_for(
            flow,
            sid,
            lambda s: any(r.status is AgentToolCallStatus.WAITING_FOR_TIMER for r in s.tool_calls),
        )
        assert snapshot.tool_calls[0].wait_until is not None
        await harness.client.skip_timer(
            sid, dex.StepExecutionId("AwaitTimer", 1), dex.TimerId.by_condition_id("durable_wait")
        )
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        events = await harness.events(flow, sid)

    assert snapshot.messages[-1].text == (
        'w1=succeeded:{"status":"completed","waited_seconds":86400,"reason":"check tomorrow"}'
    )
    started = json.loads(next(e for e in events if e.type == "timer_started").payload)
    assert started["tool_call_id"] == "w1"
    assert started["reason"] == "check tomorrow"
    assert started["wait_until"].endswith("Z")


async def test_tool_asks_the_user_then_runs_again_with_the_answer(harness_factory) -> None:
    runs: list[tuple[tuple[str, ...], str | None]] = []

    async def deploy(call):
        runs.append((call.input_answers, call.tool_call.input_continuation))
        if not call.input_answers:
            return ToolInputRequested(
                question="Which region?", choices=("eu", "us"), continuation="step-1"
            )
        return ToolExecutionResult(f"deployed to {call.input_answers[-1]}")

    runner = ScriptRunner(calls_then_answer(("d1", "deploy", {})), {"deploy": deploy})
    flow = create_agent_session_flow(
        runner,
        "AskingToolAgent",
        tool_policies={
            "deploy": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
        },
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "deploy")
        snapshot = await harness.wait_for(flow, sid, lambda s: bool(s.pending_interrupts))
        (interrupt,) = snapshot.pending_interrupts
        assert interrupt.interrupt_id == "d1-input-1"
        assert interrupt.kind is InterruptKind.QUESTION
        assert interrupt.question == "Which region?"
        request = AnswerQuestionInput(interrupt_id="d1-input-1", answer="eu")
        assert await harness.client.invoke_rpc(flow.answer_question, sid, request)
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        history = await read_step_history(harness.address, sid)

    assert runs == [((), None), (("eu",), "step-1")]
    assert snapshot.messages[-1].text == "d1=succeeded:deployed to eu"
    steps = [
        e.step_type
        for e in history
        if e.method.value == "execute" and e.outcome.value == "completed"
    ]
    assert steps.count("CallSingleAttemptTool") == 2
    assert steps.count("AwaitQuestionAnswer") == 2  # raise, then the answer


async def test_question_and_durable_wait_survive_a_worker_restart(harness_factory) -> None:
    runner = ScriptRunner(
        calls_then_answer(
            ("q1", "ask_user", {"question": "Go on?"}),
            ("w1", "durable_wait", {"duration_seconds": 3600, "reason": "cool down"}),
        )
    )
    flow = create_agent_session_flow(
        runner, "RestartAgent", built_in_tools=("ask_user", "durable_wait")
    )
    sid = session_id()
    async with harness_factory(flow) as first:
        await first.start(flow, sid, "start")
        await first.wait_for(
            flow,
            sid,
            lambda s: (
                bool(s.pending_interrupts)
                and any(r.status is AgentToolCallStatus.WAITING_FOR_TIMER for r in s.tool_calls)
            ),
        )
    # The first Worker is gone; a new one picks the waits up from committed state.
    async with harness_factory(flow) as second:
        request = AnswerQuestionInput(interrupt_id="q1", answer="yes")
        assert await second.client.invoke_rpc(flow.answer_question, sid, request)
        await second.client.skip_timer(
            sid, dex.StepExecutionId("AwaitTimer", 1), dex.TimerId.by_condition_id("durable_wait")
        )
        snapshot = await second.wait_for_turns(flow, sid, 1)

    assert snapshot.messages[-1].text == (
        'q1=succeeded:{"status":"answered","answer":"yes"} | '
        'w1=succeeded:{"status":"completed","waited_seconds":3600,"reason":"cool down"}'
    )
