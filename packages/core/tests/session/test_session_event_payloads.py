"""Every event a real session writes carries the payload the contract's event table gives:
exactly its keys, as the golden ``AgentEvent`` fixtures hold them (written from that
table). Sessions here drive tools, an approval, a question, a durable wait, plan mode,
steering, cancellation and compaction on the local engine.

``turn_failed`` and ``tool_task_started`` are driven by ``test_session_tools.py`` and
``test_tool_tasks_session.py``, which assert their whole payloads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core_session_support import CompactingRunner, assistant_text, session_id, usage

from dex_agents import (
    AgentEvent,
    CompactionPolicy,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.values import FrameworkMessage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "wire" / "AgentEvent.json"


def _spec_payload_keys() -> dict[str, frozenset[str]]:
    """Each contract event type's payload keys, from the golden fixtures."""
    keys: dict[str, frozenset[str]] = {}
    for case in json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]:
        event_type = case["wire"]["type"]
        if "." in event_type:
            continue  # an adapter-specific event: no contract shape
        payload = frozenset(json.loads(case["wire"]["payload"]))
        assert keys.setdefault(event_type, payload) == payload, event_type
    return keys


SPEC_PAYLOAD_KEYS = _spec_payload_keys()


def _turn_text(turn: AgentTurnContext) -> str:
    return next(
        m.text or "" for m in turn.messages if m.role == "user" and m.turn_id == turn.turn_id
    )


def _calls(turn: AgentTurnContext, *calls: tuple[str, str, dict[str, Any]]) -> ToolCallsRequested:
    deferred = [
        DeferredToolCall(call_id, name, json.dumps(arguments), turn.resolve_tool_policy(name))
        for call_id, name, arguments in calls
    ]
    return ToolCallsRequested(framework_run_state="round-1", tool_calls=deferred, usage=usage())


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    text = _turn_text(turn)
    if turn.is_resuming:
        statuses = ", ".join(f"{r.tool_name} {r.status.value}" for r in turn.tool_calls)
        return TurnCompleted([assistant_text(f"done: {statuses}")], usage())
    if text == "tools":
        turn.events.write_reasoning_delta("The order ID is 42.")
        turn.events.write_text_delta("Checking.")
        return _calls(
            turn,
            ("c1", "lookup", {"order_id": "42"}),
            ("c2", "charge", {"cents": 500}),
            ("c3", "ask_user", {"question": "Which size?", "choices": ["S", "M"]}),
            ("c4", "durable_wait", {"duration_seconds": 1, "reason": "let it settle"}),
        )
    if text in ("hold", "stop"):
        return _calls(turn, ("h1", "charge", {"cents": 100}))
    if turn.interaction_mode.value == "planning":
        todos = [{"content": "Run the migration", "status": "pending"}]
        return _calls(turn, ("p1", "write_todos", {"todos": todos}))
    if turn.interaction_mode.value == "executing":
        todos = [{"content": "Run the migration", "status": "completed"}]
        return _calls(turn, ("p2", "write_todos", {"todos": todos}))
    return TurnCompleted([assistant_text(f"ok: {text[:20]}")], usage())


@dataclass
class PlanningRunner(CompactingRunner):
    supports_plan_mode = True

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=json.dumps({"text": text}), text=text)


async def _tool(call: Any) -> str:
    return f"{call.tool_call.tool_name} ran"


def _check(events: Sequence[AgentEvent]) -> set[str]:
    seen: set[str] = set()
    for event in events:
        payload = json.loads(event.payload)
        assert isinstance(payload, dict), event
        expected = SPEC_PAYLOAD_KEYS.get(event.type)
        assert expected is not None, f"{event.type} is not an event type of the contract"
        assert set(payload) == expected, (event.type, payload)
        assert event.turn_id.startswith("turn-")
        assert event.attempt >= 1
        assert event.step_execution_id
        seen.add(event.type)
    return seen


async def test_every_event_of_a_real_session_has_the_contract_payload(harness_factory) -> None:
    runner = PlanningRunner(_script, {"lookup": _tool, "charge": _tool})
    flow = create_agent_session_flow(
        runner,
        "EventPayloads",
        tool_policies={
            "lookup": ToolPolicy(ToolEffect.READ),
            "charge": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        },
        built_in_tools=("ask_user", "durable_wait", "write_todos"),
        plan_mode_enabled=True,
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        sessions = harness.sessions(flow)
        # Tools, an approval, a question and a durable wait in one response.
        await sessions.start_session(sid, "tools")
        await sessions.wait_for_snapshot(sid, lambda s: len(s.pending_interrupts) == 2)
        assert await sessions.approve(sid, "c2")
        assert await sessions.answer_question(sid, "c3", "M")
        await harness.wait_for_turns(flow, sid, 1)
        # Plan mode: a draft, its approval, the executing turn that completes it.
        assert await sessions.send_user_message(sid, "plan the migration", plan_mode=True)
        snapshot = await harness.wait_for_turns(flow, sid, 2)
        assert snapshot.plan is not None
        assert snapshot.plan.status == "draft"
        assert await sessions.execute_plan(sid, snapshot.plan.revision)
        snapshot = await harness.wait_for_turns(flow, sid, 3)
        assert snapshot.plan is not None
        assert snapshot.plan.status == "completed"
        # A steer and a cancel while a call waits for its approval.
        assert await sessions.send_user_message(sid, "hold")
        await sessions.wait_for_snapshot(sid, lambda s: bool(s.pending_interrupts))
        assert await sessions.steer_user_message(sid, text="do it later")
        await harness.wait_for_turns(flow, sid, 5)
        assert await sessions.send_user_message(sid, "stop")
        await sessions.wait_for_snapshot(sid, lambda s: bool(s.pending_interrupts))
        assert await sessions.cancel_turn(sid)
        await harness.wait_for_turns(flow, sid, 6)
        events = await harness.events(flow, sid)

    seen = _check(events)
    assert seen >= {
        "turn_started",
        "turn_completed",
        "turn_steered",
        "turn_cancelled",
        "text_delta",
        "reasoning_delta",
        "tool_call_deferred",
        "tool_call_started",
        "tool_call_finished",
        "interrupt_raised",
        "interrupt_resolved",
        "timer_started",
        "plan_updated",
        "plan_execution_started",
        "usage_recorded",
    }


async def test_compaction_events_have_the_contract_payload(harness_factory) -> None:
    runner = PlanningRunner(_script)
    flow = create_agent_session_flow(
        runner, "EventPayloadsCompaction", compaction=CompactionPolicy(context_window_tokens=8)
    )
    sid = session_id()
    async with harness_factory(flow) as harness:
        sessions = harness.sessions(flow)
        await sessions.start_session(sid, "one")
        for turn in range(2, 7):
            await harness.wait_for_turns(flow, sid, turn - 1)
            assert await sessions.send_user_message(sid, f"turn {turn}")
        await harness.wait_for_turns(flow, sid, 6)
        events = await harness.events(flow, sid)
    assert runner.summaries, "the session never compacted"
    assert _check(events) >= {"compaction_started", "compaction_finished", "usage_recorded"}
    # Every event type of the contract is driven here or in the two tests named above.
    assert set(SPEC_PAYLOAD_KEYS) == {
        "turn_started",
        "turn_completed",
        "turn_failed",
        "turn_steered",
        "turn_cancelled",
        "text_delta",
        "reasoning_delta",
        "tool_call_deferred",
        "tool_call_started",
        "tool_call_finished",
        "interrupt_raised",
        "interrupt_resolved",
        "timer_started",
        "plan_updated",
        "plan_execution_started",
        "tool_task_started",
        "usage_recorded",
        "compaction_started",
        "compaction_finished",
    }
