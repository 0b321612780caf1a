"""Live events, model retries, heartbeat checkpoints, unfinished turns and queued messages."""

from __future__ import annotations

import asyncio
import json

from core_session_support import (
    ScriptRunner,
    assistant_calls,
    assistant_text,
    session_id,
    tool_result,
    usage,
    user_message,
)

from dex_agents import ToolEffect, ToolPolicy, create_agent_session_flow
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    ToolCallsRequested,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.values import AgentUserMessage


async def test_deltas_are_coalesced_and_a_retried_model_call_gets_a_new_attempt(
    harness_factory,
) -> None:
    late_writers = []

    async def script(turn: AgentTurnContext):
        for token in ["Hel", "lo", " wor", "ld"]:
            turn.events.write_text_delta(token)
        turn.events.write_reasoning_delta("thinking")
        turn.events.write_event("scripted.custom", {"n": turn.attempt})
        if turn.attempt == 1:
            raise RuntimeError("provider hiccup")
        late_writers.append(turn.events)
        return TurnCompleted(new_messages=[assistant_text("Hello world")], usage=usage())

    flow = create_agent_session_flow(ScriptRunner(script), "StreamingAgent")
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "say hello")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        late_writers[0].write_text_delta("after the handler returned")
        await asyncio.sleep(0.3)
        events = await harness.events(flow, sid)

    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    model_events = [e for e in events if e.step_execution_id.startswith("RunModel")]
    deltas = [
        (e.attempt, e.type, json.loads(e.payload))
        for e in model_events
        if e.type.endswith("_delta")
    ]
    assert deltas == [
        (1, "text_delta", {"text": "Hello world"}),
        (1, "reasoning_delta", {"text": "thinking"}),
        (2, "text_delta", {"text": "Hello world"}),
        (2, "reasoning_delta", {"text": "thinking"}),
    ]
    custom = [
        (e.attempt, json.loads(e.payload)) for e in model_events if e.type == "scripted.custom"
    ]
    assert custom == [(1, {"n": 1}), (2, {"n": 2})]
    assert len({e.step_execution_id for e in model_events}) == 1
    assert all("after the handler" not in e.payload for e in events)


async def test_tool_retry_reads_the_heartbeat_checkpoint(harness_factory) -> None:
    seen: list[tuple[int, str | None, str]] = []

    async def start_job(call):
        seen.append((call.attempt, call.heartbeat_checkpoint, call.idempotency_key))
        if call.heartbeat_checkpoint is None:
            await call.save_heartbeat_checkpoint("job-17")
            raise RuntimeError("connection reset after the job started")
        return f"finished {call.heartbeat_checkpoint}"

    def script(turn: AgentTurnContext):
        if not turn.is_resuming:
            return ToolCallsRequested(
                framework_run_state="s",
                tool_calls=[
                    DeferredToolCall("j1", "start_job", "{}", turn.resolve_tool_policy("start_job"))
                ],
                usage=usage(),
            )
        return TurnCompleted(
            new_messages=[assistant_text(describe_tool_call_outcome(turn.tool_calls[0]))],
            usage=usage(),
        )

    flow = create_agent_session_flow(
        ScriptRunner(script, {"start_job": start_job}),
        "CheckpointAgent",
        tool_policies={"start_job": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)},
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "run the job")
        snapshot = await harness.wait_for_turns(flow, sid, 1)

    key = f"{sid}/turn-1/j1"
    assert seen == [(1, None, key), (2, "job-17", key)]
    assert snapshot.messages[-1].text == "finished job-17"


class IncrementalRunner(ScriptRunner):
    """Stores the transcript as it goes and rebuilds the unfinished part on failure."""

    def build_unfinished_turn_messages(self, turn: AgentTurnContext):
        return [
            tool_result(r.tool_call_id, r.tool_name, describe_tool_call_outcome(r))
            for r in turn.tool_calls
        ]


async def test_failed_turn_stores_unfinished_messages_before_the_note(harness_factory) -> None:
    async def lookup(call):
        return "found"

    def script(turn: AgentTurnContext):
        if not turn.is_resuming:
            return ToolCallsRequested(
                framework_run_state="s",
                tool_calls=[
                    DeferredToolCall("l1", "lookup", "{}", turn.resolve_tool_policy("lookup"))
                ],
                usage=usage(),
                new_messages=[assistant_calls([("l1", "lookup", "{}")])],
            )
        raise RuntimeError("model down")

    flow = create_agent_session_flow(
        IncrementalRunner(script, {"lookup": lookup}),
        "IncrementalAgent",
        tool_policies={"lookup": ToolPolicy(ToolEffect.READ)},
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "look it up")
        snapshot = await harness.wait_for(
            flow, sid, lambda s: s.state is not None and s.state.last_turn_error is not None
        )

    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "user"]
    assert snapshot.messages[2].tool_output == "found"
    assert (snapshot.messages[3].text or "").startswith("[Dex] The previous turn failed")


async def test_snapshot_lists_queued_messages_while_a_turn_runs(harness_factory) -> None:
    release = asyncio.Event()

    async def script(turn: AgentTurnContext):
        if turn.messages[-1].text == "first":
            await release.wait()
        return TurnCompleted(new_messages=[assistant_text("ok")], usage=usage())

    flow = create_agent_session_flow(ScriptRunner(script), "QueueAgent")
    sid = session_id()
    async with harness_factory(flow) as harness:
        await harness.start(flow, sid, "first")
        await harness.wait_for(
            flow, sid, lambda s: s.state is not None and s.state.active_turn_id == "turn-1"
        )
        for text in ("second", "third"):
            assert await harness.client.invoke_rpc(
                flow.send_user_message, sid, AgentUserMessage(text=text)
            )
        snapshot = await harness.snapshot(flow, sid)
        release.set()
        final = await harness.wait_for_turns(flow, sid, 3)

    assert snapshot.queued_message_count == 2
    assert [m.text for m in snapshot.queued_messages] == ["second", "third"]
    assert all(m.message_id for m in snapshot.queued_messages)
    assert [m.text for m in final.messages] == ["first", "ok", "second", "ok", "third", "ok"]
    assert final.queued_messages == ()
    assert user_message("x").role == "user"
