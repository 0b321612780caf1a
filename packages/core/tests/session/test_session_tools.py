"""Tool calls end to end: approvals, deadlines, tool errors, failure routes, turn failures."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from core_session_support import (
    ModelScript,
    ScriptRunner,
    assistant_text,
    session_id,
    usage,
)
from core_session_support import calls_then_answer as answer_after_calls

from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy, create_agent_session_flow
from dex_agents.runner import (
    APPROVAL_DEADLINE_PASSED,
    DEFAULT_REJECTION_MESSAGE,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentTurnContext,
    DeferredToolCall,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import read_step_history
from dex_agents.values import ResolveInterruptInput


def calls_then_answer(*calls: tuple[str, str]) -> ModelScript:
    """Every ``(tool_call_id, tool_name)`` at once, with the arguments ``{"n": <index>}``."""
    return answer_after_calls(
        *((call_id, name, {"n": index}) for index, (call_id, name) in enumerate(calls))
    )


def executed(history) -> list[str]:
    return [
        e.step_type
        for e in history
        if e.method.value == "execute" and e.outcome.value == "completed"
    ]


async def test_parallel_read_runs_while_write_waits_for_approval(harness_factory) -> None:
    read_done = asyncio.Event()
    write_runs: list[str] = []

    async def read_tool(call):
        read_done.set()
        return "read ok"

    async def write_tool(call):
        write_runs.append(call.idempotency_key)
        return "charged"

    runner = ScriptRunner(
        calls_then_answer(("r1", "lookup"), ("w1", "charge")),
        {"lookup": read_tool, "charge": write_tool},
    )
    flow = create_agent_session_flow(
        runner,
        "ApprovalAgent",
        tool_policies={
            "lookup": ToolPolicy(ToolEffect.READ),
            "charge": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        },
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "charge it")
        snapshot = await harness.wait_for(
            flow,
            sid,
            lambda s: (
                bool(s.pending_interrupts)
                and any(r.tool_call_id == "r1" and r.is_final for r in s.tool_calls)
            ),
        )
        assert read_done.is_set()
        (interrupt,) = snapshot.pending_interrupts
        assert interrupt.interrupt_id == "w1"
        assert interrupt.tool_name == "charge"
        assert interrupt.deadline is None
        waiting = next(r for r in snapshot.tool_calls if r.tool_call_id == "w1")
        assert waiting.status is AgentToolCallStatus.AWAITING_APPROVAL
        assert write_runs == []

        approve = ResolveInterruptInput(interrupt_id="w1", approved=True)
        assert await harness.resolve(flow, sid, approve)
        assert not await harness.resolve(flow, sid, approve)
        unknown = ResolveInterruptInput(interrupt_id="nope", approved=True)
        assert not await harness.resolve(flow, sid, unknown)
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)

    assert write_runs == [f"{sid}/turn-1/w1"]
    assert snapshot.messages[-1].text == "r1=succeeded:read ok | w1=succeeded:charged"
    assert snapshot.pending_interrupts == ()
    steps = executed(history)
    assert steps[:2] == ["StartAgentSession", "RunModel"]
    assert steps.count("AwaitToolApproval") == 1
    assert steps.count("CallTool") == 1
    assert steps.count("CallSingleAttemptTool") == 1
    assert steps[-2:] == ["ResumeTurn", "RunModel"]
    raised = next(e for e in events if e.type == "interrupt_raised")
    assert json.loads(raised.payload)["kind"] == "approval"
    resolved = next(e for e in events if e.type == "interrupt_resolved")
    assert json.loads(resolved.payload) == {
        "interrupt_id": "w1",
        "kind": "approval",
        "approved": True,
        "answered": False,
        "rejection_message": None,
        "cancellation_reason": None,
    }


async def test_rejection_and_deadline_reject_without_running(harness_factory) -> None:
    runs: list[str] = []

    async def write_tool(call):
        runs.append(call.tool_call.tool_call_id)
        return "done"

    runner = ScriptRunner(calls_then_answer(("a", "send"), ("b", "send")), {"send": write_tool})
    flow = create_agent_session_flow(
        runner, "DeadlineAgent", interrupt_deadline=timedelta(seconds=3)
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "send twice")
        await harness.wait_for(flow, sid, lambda s: len(s.pending_interrupts) == 2)
        reject = ResolveInterruptInput(interrupt_id="a", approved=False, rejection_message=None)
        assert await harness.resolve(flow, sid, reject)
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        late = ResolveInterruptInput(interrupt_id="b", approved=True)
        assert not await harness.resolve(flow, sid, late)

    assert runs == []
    assert snapshot.messages[-1].text == (
        f"a=rejected:{DEFAULT_REJECTION_MESSAGE} | b=rejected:{APPROVAL_DEADLINE_PASSED}"
    )


async def test_tool_errors_and_exhausted_attempts_by_effect(harness_factory) -> None:
    attempts: dict[str, list[int]] = {"flaky_read": [], "flaky_write": [], "once": []}

    async def visible_error(call):
        raise ToolExecutionError("order not found")

    def failing(name: str):
        async def tool(call):
            attempts[name].append(call.attempt)
            raise RuntimeError(f"{name} crashed")

        return tool

    runner = ScriptRunner(
        calls_then_answer(
            ("e1", "visible"), ("r1", "flaky_read"), ("w1", "flaky_write"), ("s1", "once")
        ),
        {
            "visible": visible_error,
            "flaky_read": failing("flaky_read"),
            "flaky_write": failing("flaky_write"),
            "once": failing("once"),
        },
    )
    flow = create_agent_session_flow(
        runner,
        "FailingToolsAgent",
        tool_policies={
            "visible": ToolPolicy(ToolEffect.READ),
            "flaky_read": ToolPolicy(ToolEffect.READ),
            "flaky_write": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            "once": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        },
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "try everything")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        history = await read_step_history(harness.address, sid)

    assert attempts == {"flaky_read": [1, 2, 3], "flaky_write": [1, 2, 3], "once": [1]}
    final = runner.model_calls[-1].tool_calls
    by_id = {r.tool_call_id: r for r in final}
    assert by_id["e1"].status is AgentToolCallStatus.FAILED
    assert by_id["e1"].error == "order not found"
    assert by_id["r1"].status is AgentToolCallStatus.FAILED
    assert "flaky_read crashed" in (by_id["r1"].error or "")
    assert by_id["w1"].status is AgentToolCallStatus.OUTCOME_UNKNOWN
    assert by_id["s1"].status is AgentToolCallStatus.OUTCOME_UNKNOWN
    assert describe_tool_call_outcome(by_id["s1"]) == OUTCOME_UNKNOWN_TOOL_RESULT
    steps = executed(history)
    assert steps.count("RecordToolFailure") == 2
    assert steps.count("RecordToolOutcomeUnknown") == 1
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None


async def test_model_failure_after_tools_stores_the_failure_note(harness_factory) -> None:
    async def send(call):
        return "email sent"

    def script(turn: AgentTurnContext):
        if not turn.is_resuming:
            return ToolCallsRequested(
                framework_run_state="s",
                tool_calls=[
                    DeferredToolCall(
                        "m1", "send_email", '{"to":"ops"}', turn.resolve_tool_policy("send_email")
                    )
                ],
                usage=usage(),
            )
        raise RuntimeError("model provider unavailable")

    runner = ScriptRunner(script, {"send_email": send})
    flow = create_agent_session_flow(
        runner,
        "FailingModelAgent",
        tool_policies={"send_email": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)},
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "email ops")
        snapshot = await harness.wait_for(
            flow, sid, lambda s: s.state is not None and s.state.last_turn_error is not None
        )
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)

    assert snapshot.state is not None
    assert snapshot.state.active_turn_id is None
    assert "model provider unavailable" in (snapshot.state.last_turn_error or "")
    assert snapshot.tool_calls == ()
    note = snapshot.messages[-1]
    assert note.role == "user"
    assert note.text == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        '- send_email {"to":"ops"} -> succeeded: email sent\n'
        "Do not repeat these tool calls unless the user asks again."
    )
    assert len([m for m in runner.model_calls if m.is_resuming]) == 3
    assert executed(history)[-1] == "RecordTurnFailure"
    failed = [e for e in events if e.type == "turn_failed"]
    assert len(failed) == 1
    assert "model provider unavailable" in json.loads(failed[0].payload)["error"]


async def test_runner_defect_fails_the_turn_with_the_defect_named(harness_factory) -> None:
    def script(turn: AgentTurnContext):
        policy = turn.resolve_tool_policy("t")
        return ToolCallsRequested(
            framework_run_state="s",
            tool_calls=[
                DeferredToolCall("same", "t", "{}", policy),
                DeferredToolCall("same", "t", "{}", policy),
            ],
            usage=usage(),
        )

    flow = create_agent_session_flow(ScriptRunner(script), "DefectAgent")
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "go")
        snapshot = await harness.wait_for(
            flow, sid, lambda s: s.state is not None and s.state.last_turn_error is not None
        )
    assert "appears twice" in (snapshot.state.last_turn_error or "")  # type: ignore[union-attr]
    assert [m.role for m in snapshot.messages] == ["user"]


async def test_two_agents_share_one_registry(harness_factory) -> None:
    def named(name: str):
        def script(turn: AgentTurnContext):
            return TurnCompleted(new_messages=[assistant_text(name)], usage=usage())

        return script

    first = create_agent_session_flow(ScriptRunner(named("first")), "FirstAgent")
    second = create_agent_session_flow(ScriptRunner(named("second")), "SecondAgent")
    assert first.agent_state is not second.agent_state
    sid_a, sid_b = session_id(), session_id()
    async with harness_factory(first, second) as harness:
        await harness.start(first, sid_a, "hi")
        await harness.start(second, sid_b, "hi")
        a = await harness.wait_for_turns(first, sid_a, 1)
        b = await harness.wait_for_turns(second, sid_b, 1)
    assert a.messages[-1].text == "first"
    assert b.messages[-1].text == "second"
