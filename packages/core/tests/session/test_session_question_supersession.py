"""``question_supersedes_later_calls`` on the real engine: a question ends its response."""

from __future__ import annotations

import json

from core_session_support import ScriptRunner, calls_then_answer, session_id

from dex_agents import AgentStatus, AgentToolCallStatus, create_agent_session_flow
from dex_agents.runner import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
from dex_agents.testing import read_step_history

BUILT_IN = ("ask_user", "durable_wait")
QUESTION_THEN_WAIT = (
    ("q1", "ask_user", {"question": "Which date?"}),
    ("w1", "durable_wait", {"duration_seconds": 30, "reason": "check later"}),
)


async def test_the_wait_after_a_question_is_not_run(harness_factory) -> None:
    runner = ScriptRunner(calls_then_answer(*QUESTION_THEN_WAIT))
    flow = create_agent_session_flow(
        runner, "SupersedeAgent", built_in_tools=BUILT_IN, question_supersedes_later_calls=True
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "/ask-many x")
        snapshot = await harness.wait_for(flow, sid, lambda s: bool(s.pending_interrupts))
        assert [i.interrupt_id for i in snapshot.pending_interrupts] == ["q1"]
        calls = {r.tool_call_id: r for r in snapshot.tool_calls}
        assert calls["q1"].status is AgentToolCallStatus.AWAITING_ANSWER
        assert calls["w1"].status is AgentToolCallStatus.REJECTED
        assert calls["w1"].rejection_message == TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
        assert calls["w1"].cancellation_reason == "superseded_by_user_input"
        assert calls["w1"].wait_until is None
        assert await harness.sessions(flow).answer_question(sid, "q1", "Friday")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)

    assert snapshot.state is not None
    assert snapshot.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert snapshot.pending_interrupts == ()
    assert snapshot.messages[-1].text == (
        'q1=succeeded:{"status":"answered","answer":"Friday"}'
        f" | w1=rejected:{TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT}"
    )
    types = [e.type for e in events]
    assert "timer_started" not in types
    assert types.count("interrupt_raised") == 1
    finished = [json.loads(e.payload) for e in events if e.type == "tool_call_finished"]
    assert {"tool_call_id": "w1", "tool_name": "durable_wait", "status": "rejected"} in finished
    steps = {e.step_type for e in history}
    assert "AwaitQuestionAnswer" in steps
    assert "AwaitTimer" not in steps


async def test_without_the_option_the_wait_starts_its_timer(harness_factory) -> None:
    runner = ScriptRunner(calls_then_answer(*QUESTION_THEN_WAIT))
    flow = create_agent_session_flow(runner, "BothCallsAgent", built_in_tools=BUILT_IN)
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "/ask-many x")
        snapshot = await harness.wait_for(
            flow,
            sid,
            lambda s: (
                bool(s.pending_interrupts)
                and any(r.status is AgentToolCallStatus.WAITING_FOR_TIMER for r in s.tool_calls)
            ),
        )
        events = await harness.events(flow, sid)

    assert [i.interrupt_id for i in snapshot.pending_interrupts] == ["q1"]
    assert not any(r.cancellation_reason for r in snapshot.tool_calls)
    assert "timer_started" in [e.type for e in events]
