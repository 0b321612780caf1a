"""Pure parts of ui_stream: the import guard, snapshot conversions and the part mapper."""

from __future__ import annotations

import json
import subprocess
import sys

from dex_agents.ui_stream import (
    UIPartMapper,
    convert_agent_snapshot_to_json,
    convert_agent_snapshot_to_ui_messages,
)
from dex_agents.ui_stream._tokens import decode_ui_resume_token
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    InterruptKind,
    ToolEffect,
)


def test_importing_without_starlette_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "try:\n    import dex_agents.ui_stream\n"
        "except ImportError as error:\n    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "pip install 'dex-agents[ui]'" in result.stdout


def _snapshot() -> AgentSnapshot:
    messages = (
        AgentMessage(1, "turn-1", "user", '{"secret":"instructions"}', text="charge it"),
        AgentMessage(2, "turn-1", "assistant", "{}", text="Checking."),
        AgentMessage(
            3,
            "turn-1",
            "assistant",
            "{}",
            tool_call_id="r1",
            tool_name="lookup",
            tool_arguments='{"item":"book"}',
        ),
        AgentMessage(
            4, "turn-1", "tool", "{}", tool_call_id="r1", tool_name="lookup", tool_output="in stock"
        ),
    )
    records = (
        AgentToolCall(
            "r1",
            "turn-1",
            "lookup",
            '{"item":"book"}',
            ToolEffect.READ,
            False,
            AgentToolCallStatus.SUCCEEDED,
            0,
            output="in stock",
            trace_context="00-abc",
        ),
        AgentToolCall(
            "w1",
            "turn-1",
            "charge",
            '{"cents":5}',
            ToolEffect.NON_IDEMPOTENT_WRITE,
            True,
            AgentToolCallStatus.AWAITING_APPROVAL,
            1,
            tool_source_reference="ref",
            input_continuation="c",
            input_answers=("a",),
            task_answer_pending=True,
        ),
    )
    interrupt = AgentInterrupt(
        "w1", InterruptKind.APPROVAL, "turn-1", "w1", "charge", '{"cents":5}'
    )
    return AgentSnapshot(
        state=AgentState(
            status=AgentStatus.RUNNING_TOOLS, turn_count=1, active_turn_id="turn-1", message_count=4
        ),
        messages=messages,
        pending_interrupts=(interrupt,),
        tool_calls=records,
    )


def test_snapshot_json_leaves_out_every_step_only_field() -> None:
    data = convert_agent_snapshot_to_json(_snapshot())
    text = json.dumps(data)
    for name in (
        "framework_item",
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending",
    ):
        assert name not in text
    assert "instructions" not in text
    assert data["messages"][0] == {
        "sequence": 1,
        "turn_id": "turn-1",
        "role": "user",
        "text": "charge it",
        "tool_call_id": None,
        "tool_name": None,
        "tool_arguments": None,
        "tool_output": None,
    }
    assert data["tool_calls"][1]["status"] == "awaiting_approval"


def test_snapshot_ui_messages_show_stored_parts_and_pending_approvals() -> None:
    user, assistant = convert_agent_snapshot_to_ui_messages(_snapshot())
    assert user == {
        "id": "turn-1-user",
        "role": "user",
        "parts": [{"type": "text", "text": "charge it"}],
    }
    assert assistant["id"] == "turn-1-assistant"
    assert assistant["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Checking.", "state": "done"},
        {
            "type": "dynamic-tool",
            "toolName": "lookup",
            "toolCallId": "r1",
            "state": "output-available",
            "input": {"item": "book"},
            "output": "in stock",
        },
        {
            "type": "dynamic-tool",
            "toolName": "charge",
            "toolCallId": "w1",
            "state": "approval-requested",
            "input": {"cents": 5},
            "approval": {"id": "w1"},
        },
    ]


def _event(type: str, payload: object, step: str = "RunModel-1", attempt: int = 1) -> AgentEvent:
    return AgentEvent(type, "turn-1", attempt, step, json.dumps(payload))


def test_a_new_attempt_resets_the_step_and_tool_step_text_is_an_event() -> None:
    mapper = UIPartMapper.for_turn("turn-1")
    assert [p["type"] for p in mapper.map(_event("turn_started", {"sequence": 1}))] == ["start"]
    first = mapper.map(_event("text_delta", {"text": "Hel"}))
    assert [p["type"] for p in first] == ["start-step", "text-start", "text-delta"]
    retry = mapper.map(_event("text_delta", {"text": "Hello"}, attempt=2))
    assert [p["type"] for p in retry] == ["reset-step", "text-start", "text-delta"]
    mapper.map(
        _event("tool_call_started", {"tool_call_id": "c", "tool_name": "t"}, step="CallTool-1")
    )
    tool_text = mapper.map(_event("text_delta", {"text": "log"}, step="CallTool-1"))
    assert [p["type"] for p in tool_text] == ["data-agent-event"]
    assert tool_text[0]["transient"] is True
    assert tool_text[0]["data"]["step_execution_id"] == "CallTool-1"
    next_model = mapper.map(_event("reasoning_delta", {"text": "hmm"}, step="RunModel-2"))
    assert [p["type"] for p in next_model] == [
        "text-end",
        "finish-step",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
    ]
    assert [p["type"] for p in mapper.finish("error", "boom")] == [
        "reasoning-end",
        "finish-step",
        "error",
        "finish",
    ]


def test_tool_outcomes_map_to_their_part_types() -> None:
    from dex_agents.ui_stream._parts import ToolDetails

    mapper = UIPartMapper.for_turn("turn-1")
    mapper.map(_event("turn_started", {}))
    for call, status, expected in (
        ("a", "succeeded", "tool-output-available"),
        ("b", "failed", "tool-output-error"),
        ("c", "outcome_unknown", "tool-output-error"),
        ("d", "rejected", "tool-output-denied"),
    ):
        details = ToolDetails("t", "{}", AgentToolCallStatus(status), "out", "err")
        deferred = mapper.map(_event("tool_call_deferred", {"tool_call_id": call}), details)
        assert deferred[-1]["type"] == "tool-input-available"
        finished = mapper.map(
            _event("tool_call_finished", {"tool_call_id": call, "status": status}), details
        )
        assert finished[-1]["type"] == expected


def test_tokens_that_do_not_decode_read_as_no_token() -> None:
    for token in (None, "", "!!!", "e30", "x" * 70_000):
        assert decode_ui_resume_token(token) is None
