"""Wire values: snake_case JSON equal to the contract, decoded the same by Dex and by from_wire."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from dex import CodecRegistry

from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentSnapshot,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    InterruptKind,
    ToolEffect,
)
from dex_agents.values import (
    AgentState,
    ListAgentMessagesOutput,
    add_agent_usage,
    empty_agent_usage,
    format_timestamp,
    from_wire,
    from_wire_json,
    message_sequence_key,
    parse_timestamp,
    to_wire,
    to_wire_json,
)


def _record() -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="call-1",
        turn_id="turn-1",
        tool_name="lookup",
        arguments='{"id":1}',
        effect=ToolEffect.READ,
        requires_approval=False,
        status=AgentToolCallStatus.SUCCEEDED,
        deferral_order=0,
        output="ok",
        input_choices=("a", "b"),
    )


def test_state_json_uses_the_contract_names_and_values() -> None:
    state = AgentState(turn_count=1, active_turn_id="turn-1", message_count=2)
    assert to_wire(state) == {
        "status": "waiting_for_user_message",
        "turn_count": 1,
        "active_turn_id": "turn-1",
        "message_count": 2,
        "last_turn_error": None,
        "interaction_mode": "chat",
        "accepts_turn_control": False,
    }


def test_record_json_carries_every_field_snake_case() -> None:
    data = json.loads(to_wire_json(_record()))
    assert data["status"] == "succeeded"
    assert data["effect"] == "read"
    assert data["input_choices"] == ["a", "b"]
    assert data["input_answers"] == []
    for name in (
        "wait_until",
        "cancellation_reason",
        "task_id",
        "tool_source_reference",
        "trace_context",
    ):
        assert name in data
        assert data[name] is None


@pytest.mark.parametrize(
    "value",
    [
        AgentState(),
        _record(),
        AgentSnapshot(
            state=AgentState(status=AgentState().status),
            messages=(
                AgentMessage(
                    sequence=1, turn_id="turn-1", role="user", framework_item="{}", text="hi"
                ),
            ),
            pending_interrupts=(
                AgentInterrupt(
                    interrupt_id="c",
                    kind=InterruptKind.QUESTION,
                    turn_id="turn-1",
                    tool_call_id="c",
                    tool_name="ask_user",
                    arguments="{}",
                    choices=("x",),
                ),
            ),
            tool_calls=(_record(),),
            usage=AgentUsage(model_calls=1),
        ),
        ListAgentMessagesOutput(messages=(), next_before_sequence=None),
        AgentEvent(
            type="text_delta",
            turn_id="turn-1",
            attempt=1,
            step_execution_id="RunModel-1",
            payload='{"text":"hi"}',
        ),
    ],
)
def test_dex_codec_and_from_wire_agree(value: object) -> None:
    codec = CodecRegistry().resolve(type(value))
    encoded = codec.encode(value)
    assert encoded.data == to_wire_json(value)
    assert codec.decode(encoded) == value
    assert from_wire_json(type(value), encoded.data) == value  # type: ignore[arg-type]


def test_from_wire_reports_the_bad_field() -> None:
    with pytest.raises(TypeError, match=r"AgentToolCall\.status must be one of"):
        from_wire(AgentToolCall, {**to_wire(_record()), "status": "done"})
    with pytest.raises(TypeError, match=r"AgentState\.turn_count must be an integer"):
        from_wire(AgentState, {"turn_count": "1"})
    with pytest.raises(TypeError, match="missing field tool_call_id"):
        from_wire(AgentToolCall, {"turn_id": "turn-1"})
    with pytest.raises(ValueError, match="must not be negative"):
        AgentUsage(input_tokens=-1)


def test_from_wire_fills_defaults_for_fields_an_older_writer_left_out() -> None:
    data = to_wire(_record())
    for name in ("wait_until", "task_id", "input_answers", "task_answer_pending"):
        del data[name]
    decoded = from_wire(AgentToolCall, data)
    assert decoded.input_answers == ()
    assert decoded.task_answer_pending is False


def test_usage_helpers() -> None:
    total = add_agent_usage(
        AgentUsage(model_calls=1, input_tokens=2), AgentUsage(model_calls=1, reasoning_tokens=3)
    )
    assert total == AgentUsage(model_calls=2, input_tokens=2, reasoning_tokens=3)
    assert empty_agent_usage() == AgentUsage()


def test_sequence_keys_and_timestamps() -> None:
    assert message_sequence_key(7) == "000000000007"
    with pytest.raises(ValueError, match="sequence"):
        message_sequence_key(0)
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert format_timestamp(moment) == "2026-01-02T03:04:05.678Z"
    assert parse_timestamp("2026-01-02T03:04:05.678Z") == moment.replace(microsecond=678_000)
    other_zone = datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(other_zone) == "2026-01-02T03:04:05.000Z"
    with pytest.raises(ValueError, match="timezone"):
        format_timestamp(datetime(2026, 1, 1))


def test_session_codecs_write_the_same_json_and_fill_missing_fields() -> None:
    from dex import Value, WireKind

    from dex_agents import session_codec_registry

    registry = session_codec_registry()
    for value in (_record(), AgentState(turn_count=3)):
        codec = registry.resolve(type(value))
        assert codec.encode(value).data == CodecRegistry().resolve(type(value)).encode(value).data
    older = {
        key: item
        for key, item in to_wire(_record()).items()
        if key not in {"task_id", "trace_context"}
    }
    decoded = registry.resolve(AgentToolCall).decode(Value(WireKind.JSON, json.dumps(older)))
    assert decoded == _record()
    interrupts = registry.resolve(tuple[AgentInterrupt, ...])
    pending = (
        AgentInterrupt(
            interrupt_id="c",
            kind=InterruptKind.APPROVAL,
            turn_id="turn-1",
            tool_call_id="c",
            tool_name="t",
            arguments="{}",
        ),
    )
    assert interrupts.decode(interrupts.encode(pending)) == pending


def _keys(value: object) -> set[str]:
    data = to_wire(value)
    assert isinstance(data, dict)
    return set(data)


def test_rpc_inputs_and_outputs_have_the_contract_fields() -> None:
    from dex_agents.values import (
        AgentSessionStartInput,
        AgentUserMessage,
        AnswerQuestionInput,
        ListAgentMessagesInput,
        ResolveInterruptInput,
    )

    assert _keys(AgentUserMessage(text="hi")) == {"text", "plan_mode"}
    assert _keys(ResolveInterruptInput("c", True)) == {
        "interrupt_id",
        "approved",
        "rejection_message",
    }
    assert _keys(AnswerQuestionInput("c", "yes")) == {"interrupt_id", "answer"}
    assert _keys(ListAgentMessagesInput()) == {"before_sequence", "limit"}
    assert _keys(ListAgentMessagesOutput(messages=(), next_before_sequence=None)) == {
        "messages",
        "next_before_sequence",
        "deleted_before_sequence",
    }
    assert _keys(AgentSnapshot(state=None)) == {
        "state",
        "messages",
        "pending_interrupts",
        "tool_calls",
        "usage",
        "queued_message_count",
        "plan",
        "queued_messages",
        "steered_messages",
        "context_summary",
        "session_settings",
    }
    assert _keys(AgentSessionStartInput()) == {"initial_message", "session_settings"}


def test_persisted_values_have_the_contract_fields() -> None:
    from dex_agents.values import ToolCallCompleted, TurnReplySequence

    assert _keys(AgentUsage()) == {
        "model_calls",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    }
    assert _keys(AgentMessage(sequence=1, turn_id="turn-1", role="user", framework_item="{}")) == {
        "sequence",
        "turn_id",
        "role",
        "framework_item",
        "text",
        "tool_call_id",
        "tool_name",
        "tool_arguments",
        "tool_output",
    }
    assert _keys(_record()) == {
        "tool_call_id",
        "turn_id",
        "tool_name",
        "arguments",
        "effect",
        "requires_approval",
        "status",
        "deferral_order",
        "output",
        "error",
        "rejection_message",
        "tool_source_reference",
        "trace_context",
        # the 0.2.0 fields of the record
        "wait_until",
        "input_continuation",
        "input_answers",
        "input_question",
        "input_choices",
        "input_allows_free_text",
        "cancellation_reason",
        "task_id",
        "task_poll_interval_seconds",
        "task_answer_pending",
    }
    assert _keys(TurnReplySequence(turn_id="turn-1", sequence=2)) == {"turn_id", "sequence"}
    assert _keys(ToolCallCompleted(tool_call_id="c")) == {"tool_call_id"}
    assert _keys(
        AgentEvent(type="t", turn_id="turn-1", attempt=1, step_execution_id="s", payload="{}")
    ) == {"type", "turn_id", "attempt", "step_execution_id", "payload"}
    assert {status.value for status in AgentToolCallStatus} == {
        "awaiting_approval",
        "approved",
        "succeeded",
        "failed",
        "rejected",
        "outcome_unknown",
        "awaiting_answer",
        "waiting_for_timer",
        "waiting_for_task",
    }
    assert {effect.value for effect in ToolEffect} == {
        "read",
        "idempotent_write",
        "non_idempotent_write",
        "unclassified",
    }
