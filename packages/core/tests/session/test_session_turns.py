"""Turns end to end on the local engine: Step shape, stored messages, records, events."""

from __future__ import annotations

import json

import pytest
from core_session_support import (
    ScriptRunner,
    assistant_calls,
    assistant_text,
    session_id,
    tool_result,
    usage,
)

from dex_agents import (
    AgentSessionOptions,
    AgentStatus,
    AgentToolCallStatus,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    ToolCallsRequested,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import read_step_history
from dex_agents.values import ListAgentMessagesInput


def one_tool_then_answer(tool_name: str, arguments: str = '{"order_id":"42"}'):
    def script(turn: AgentTurnContext):
        if not turn.is_resuming:
            call = DeferredToolCall(
                "call-1", tool_name, arguments, turn.resolve_tool_policy(tool_name)
            )
            return ToolCallsRequested(
                framework_run_state=json.dumps({"round": 1}),
                tool_calls=[call],
                usage=usage(),
                new_messages=[assistant_calls([("call-1", tool_name, arguments)])],
            )
        results = [
            tool_result(r.tool_call_id, r.tool_name, describe_tool_call_outcome(r))
            for r in turn.tool_calls
        ]
        answer = "; ".join(describe_tool_call_outcome(r) for r in turn.tool_calls)
        return TurnCompleted(
            new_messages=[*results, assistant_text(f"answer: {answer}")], usage=usage()
        )

    return script


async def test_read_tool_turn_runs_model_tool_resume_model(harness_factory) -> None:
    async def lookup(call):
        assert call.idempotency_key == f"{call.flow_id}/turn-1/call-1"
        return "order 42 shipped"

    runner = ScriptRunner(one_tool_then_answer("lookup_order"), {"lookup_order": lookup})
    flow = create_agent_session_flow(
        runner, "ReadToolAgent", tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "Where is order 42?")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        events = await harness.events(flow, sid)
        history = await read_step_history(harness.address, sid)

    assert snapshot.state is not None
    assert snapshot.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert snapshot.state.last_turn_error is None
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "assistant"]
    assert [m.sequence for m in snapshot.messages] == [1, 2, 3, 4]
    assert {m.turn_id for m in snapshot.messages} == {"turn-1"}
    assert snapshot.messages[-1].text == "answer: order 42 shipped"
    assert snapshot.tool_calls == ()
    assert snapshot.pending_interrupts == ()
    assert snapshot.usage.model_calls == 2
    assert snapshot.usage.input_tokens == 20

    executed = [
        e.step_type
        for e in history
        if e.method.value == "execute" and e.outcome.value == "completed"
    ]
    assert executed == ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel"]

    types = [e.type for e in events]
    assert types[0] == "turn_started"
    assert types[-1] == "turn_completed"
    for expected in (
        "tool_call_deferred",
        "tool_call_started",
        "tool_call_finished",
        "usage_recorded",
    ):
        assert expected in types
    completed = next(e for e in events if e.type == "turn_completed")
    assert json.loads(completed.payload) == {"message_count": 3}
    deferred = next(e for e in events if e.type == "tool_call_deferred")
    assert json.loads(deferred.payload) == {
        "tool_call_id": "call-1",
        "tool_name": "lookup_order",
        "effect": "read",
        "requires_approval": False,
    }
    finished = next(e for e in events if e.type == "tool_call_finished")
    assert json.loads(finished.payload)["status"] == "succeeded"
    assert all(e.turn_id == "turn-1" and e.step_execution_id for e in events)

    # The second model call saw the final record.
    resumed = runner.model_calls[-1]
    assert resumed.is_resuming
    assert resumed.tool_calls[0].status is AgentToolCallStatus.SUCCEEDED
    assert resumed.tool_calls[0].output == "order 42 shipped"


async def test_message_sent_during_a_turn_starts_the_next_turn(harness_factory) -> None:
    def script(turn: AgentTurnContext):
        return TurnCompleted(
            new_messages=[assistant_text(f"echo {turn.messages[-1].text}")], usage=usage()
        )

    flow = create_agent_session_flow(ScriptRunner(script), "EchoAgent")
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "first")
        assert await harness.client.invoke_rpc(flow.send_user_message, sid, _message("second"))
        assert not await harness.client.invoke_rpc(flow.send_user_message, sid, _message(" \t\n"))
        snapshot = await harness.wait_for_turns(flow, sid, 2)
        page = await harness.client.invoke_rpc(
            flow.list_agent_messages, sid, ListAgentMessagesInput(before_sequence=None, limit=1)
        )
        older = await harness.client.invoke_rpc(
            flow.list_agent_messages,
            sid,
            ListAgentMessagesInput(before_sequence=page.next_before_sequence, limit=1000),
        )

    assert [m.text for m in snapshot.messages] == ["first", "echo first", "second", "echo second"]
    assert [m.turn_id for m in snapshot.messages] == ["turn-1", "turn-1", "turn-2", "turn-2"]
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 2
    assert [m.sequence for m in page.messages] == [4]
    assert page.next_before_sequence == 4
    assert [m.sequence for m in older.messages] == [1, 2, 3]
    assert older.next_before_sequence is None


def _message(text: str):
    from dex_agents.values import AgentUserMessage

    return AgentUserMessage(text=text)


async def test_session_without_initial_message_waits(harness_factory) -> None:
    def script(turn: AgentTurnContext):
        return TurnCompleted(new_messages=[assistant_text("hello")], usage=usage())

    flow = create_agent_session_flow(ScriptRunner(script), "QuietAgent", AgentSessionOptions())
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, None)
        snapshot = await harness.wait_for(flow, sid, lambda s: s.state is not None)
        assert snapshot.state is not None
        assert snapshot.state.turn_count == 0
        assert await harness.client.invoke_rpc(flow.send_user_message, sid, _message("hi"))
        snapshot = await harness.wait_for_turns(flow, sid, 1)
    assert [m.text for m in snapshot.messages] == ["hi", "hello"]


async def test_a_registry_with_dex_default_codecs_runs_the_same_session(harness_factory) -> None:
    # The harness decodes with session_codec_registry() (as AgentHost does); Dex's own
    # dataclass codecs read and write the same session too.

    runner = ScriptRunner(one_tool_then_answer("lookup_order"), {"lookup_order": _lookup})
    flow = create_agent_session_flow(
        runner, "CodecAgent", tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}
    )
    sid = session_id()
    async with harness_factory(flow, session_codecs=False) as harness:
        await harness.start(flow, sid, "Where is order 42?")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
    assert snapshot.messages[-1].text == "answer: shipped"


async def _lookup(call) -> str:
    return "shipped"


async def test_bad_rpc_inputs_return_false_or_raise_and_change_nothing(harness_factory) -> None:
    from dex_agents.values import AgentUserMessage, AnswerQuestionInput, ResolveInterruptInput

    def script(turn: AgentTurnContext):
        return TurnCompleted(new_messages=[assistant_text("done")], usage=usage())

    flow = create_agent_session_flow(ScriptRunner(script), "StrictAgent")
    sid = session_id()
    async with harness_factory(flow) as harness:
        client = harness.client
        await harness.start(flow, sid, "hello")
        before = await harness.wait_for_turns(flow, sid, 1)

        refused = [
            await client.invoke_rpc(flow.send_user_message, sid, AgentUserMessage(text="\u3000\n")),
            await client.invoke_rpc(
                flow.send_user_message, sid, AgentUserMessage(text="plan it", plan_mode=True)
            ),
            await harness.resolve(flow, sid, ResolveInterruptInput("no-such-call", True)),
            await harness.resolve(flow, sid, ResolveInterruptInput("", False)),
            await harness.resolve(flow, sid, ResolveInterruptInput("a/b", False)),
            await client.invoke_rpc(
                flow.answer_question, sid, AnswerQuestionInput("no-such-call", "yes")
            ),
        ]
        assert refused == [False] * len(refused)

        # A value that never passed its own checks (as another client could send it)
        # fails the RPC with an error that names the field.
        bad_page = ListAgentMessagesInput()
        object.__setattr__(bad_page, "limit", "ten")
        with pytest.raises(Exception, match="limit"):
            await client.invoke_rpc(flow.list_agent_messages, sid, bad_page)

        clamped = await client.invoke_rpc(
            flow.list_agent_messages, sid, ListAgentMessagesInput(limit=-5)
        )
        empty = await client.invoke_rpc(
            flow.list_agent_messages, sid, ListAgentMessagesInput(before_sequence=0)
        )
        after = await harness.snapshot(flow, sid)

    assert [m.sequence for m in clamped.messages] == [2]
    assert empty.messages == ()
    assert empty.next_before_sequence is None
    assert after == before
