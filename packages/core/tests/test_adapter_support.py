"""dex_agents._adapter_support: the rules every framework adapter shares."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from dex_agents import AgentToolCall, AgentToolCallStatus, AgentUsage, ToolEffect, ToolPolicy
from dex_agents._adapter_support import current_deferred_tool_execution, current_model_step_context
from dex_agents.runner import (
    BUILT_IN_TOOL_POLICY,
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ModelCallMetadata,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
    answer_tool_call,
    check_model_tool_call_id,
    counted_model_step_outcome,
    declared_approval_in,
    declared_effect_in,
    decode_model_call_count,
    describe_tool_call_outcome,
    encode_model_call_count,
    get_deferred_tool_execution,
    get_model_step_context,
    known_tool,
    resolve_declared_tool_policy,
    serving_deferred_tool_execution,
    serving_model_step,
    single_response_usage,
    tool_arguments_object,
    tool_declaration_metadata,
)
from dex_agents.testing import RecordingEventWriter
from dex_agents.values import FrameworkMessage


class _NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _nothing(*_: Any) -> None:
    return None


def _record(call_id: str, status: AgentToolCallStatus, **fields: Any) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name="lookup",
        arguments="{}",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=status,
        deferral_order=0,
        **fields,
    )


def _turn(
    *,
    policies: dict[str, ToolPolicy] | None = None,
    records: tuple[AgentToolCall, ...] = (),
    default: ToolEffect = ToolEffect.UNCLASSIFIED,
) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s-1",
        turn_id="turn-1",
        attempt=1,
        messages=(),
        framework_run_state=None,
        tool_calls=records,
        events=RecordingEventWriter(),
        cancellation=_NotCancelled(),
        deadline=datetime(2030, 1, 1, tzinfo=UTC),
        step_execution_id="step-1",
        tool_policies=policies or {},
        default_tool_effect=default,
        heartbeat=_nothing,
    )


def _execution(call_id: str = "c1") -> DeferredToolExecution:
    return DeferredToolExecution(
        flow_id="s-1",
        tool_call=_record(call_id, AgentToolCallStatus.APPROVED),
        idempotency_key=f"s-1/turn-1/{call_id}",
        attempt=1,
        events=RecordingEventWriter(),
        cancellation=_NotCancelled(),
        deadline=datetime(2030, 1, 1, tzinfo=UTC),
        heartbeat=_nothing,
        heartbeat_checkpoint=None,
        save_heartbeat_checkpoint=_nothing,
    )


# --- the running call and step ---------------------------------------------------------


def test_the_running_tool_call_is_visible_only_inside_its_block() -> None:
    assert current_deferred_tool_execution() is None
    with pytest.raises(LookupError, match="only available inside a tool"):
        get_deferred_tool_execution()
    call = _execution()
    with serving_deferred_tool_execution(call):
        assert get_deferred_tool_execution() is call
        assert current_deferred_tool_execution() is call
        inner = _execution("c2")
        with serving_deferred_tool_execution(inner):
            assert get_deferred_tool_execution().idempotency_key == "s-1/turn-1/c2"
        assert get_deferred_tool_execution() is call
    assert current_deferred_tool_execution() is None


async def test_a_thread_started_by_the_tool_sees_the_call() -> None:
    call = _execution()
    with serving_deferred_tool_execution(call):
        seen = await asyncio.to_thread(get_deferred_tool_execution)
    assert seen is call


async def test_parallel_tool_calls_each_see_their_own() -> None:
    async def run(call_id: str) -> str:
        with serving_deferred_tool_execution(_execution(call_id)):
            await asyncio.sleep(0)
            return get_deferred_tool_execution().idempotency_key

    keys = await asyncio.gather(run("a"), run("b"))
    assert keys == ["s-1/turn-1/a", "s-1/turn-1/b"]


def test_the_running_model_step_is_visible_only_inside_its_block() -> None:
    assert current_model_step_context() is None
    with pytest.raises(LookupError, match="RunModel"):
        get_model_step_context()
    turn = _turn()
    with serving_model_step(turn):
        assert get_model_step_context() is turn
    assert current_model_step_context() is None


def test_serving_refuses_the_wrong_value() -> None:
    with (
        pytest.raises(TypeError, match="DeferredToolExecution"),
        serving_deferred_tool_execution("c1"),  # type: ignore[arg-type]
    ):
        pass
    with (
        pytest.raises(TypeError, match="AgentTurnContext"),
        serving_model_step(None),  # type: ignore[arg-type]
    ):
        pass


# --- declarations and policies ---------------------------------------------------------


def test_declaration_metadata_uses_the_shared_keys_and_checks_its_input() -> None:
    assert tool_declaration_metadata(ToolEffect.READ) == {DEX_EFFECT_METADATA_KEY: "read"}
    assert tool_declaration_metadata("idempotent_write", requires_approval=True) == {
        DEX_EFFECT_METADATA_KEY: "idempotent_write",
        DEX_REQUIRES_APPROVAL_METADATA_KEY: True,
    }
    assert DEX_EFFECT_METADATA_KEY == "dex_effect"
    assert DEX_REQUIRES_APPROVAL_METADATA_KEY == "dex_requires_approval"
    with pytest.raises(ValueError, match="effect must be a ToolEffect"):
        tool_declaration_metadata("write")
    with pytest.raises(TypeError, match="requires_approval must be a bool"):
        tool_declaration_metadata(ToolEffect.READ, requires_approval="yes")  # type: ignore[arg-type]


def test_declarations_are_read_back_and_bad_values_name_the_tool() -> None:
    metadata = tool_declaration_metadata(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    assert declared_effect_in(metadata, "t") is ToolEffect.NON_IDEMPOTENT_WRITE
    assert declared_approval_in(metadata, "t") is False
    assert declared_effect_in(None, "t") is None
    assert declared_approval_in({}, "t") is None
    with pytest.raises(ValueError, match="tool 'refund' declares dex_effect='writes'"):
        declared_effect_in({DEX_EFFECT_METADATA_KEY: "writes"}, "refund")
    with pytest.raises(ValueError, match="tool 'refund' declares dex_requires_approval='no'"):
        declared_approval_in({DEX_REQUIRES_APPROVAL_METADATA_KEY: "no"}, "refund")


def test_policy_precedence_session_then_declaration_then_default() -> None:
    turn = _turn(policies={"refund": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    # The session's policy wins over the tool's declared effect and approval.
    assert resolve_declared_tool_policy(
        turn, "refund", ToolEffect.NON_IDEMPOTENT_WRITE, True
    ) == ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)
    # Then the declaration: a declared approval wins over the effect's default.
    assert resolve_declared_tool_policy(turn, "lookup", ToolEffect.READ, True) == (
        ResolvedToolPolicy(ToolEffect.READ, True)
    )
    assert resolve_declared_tool_policy(
        turn, "cancel", ToolEffect.NON_IDEMPOTENT_WRITE, None
    ) == ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)
    # Then the session's default effect, approval following it.
    assert resolve_declared_tool_policy(turn, "other", None, None) == (
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True)
    )
    read_default = _turn(default=ToolEffect.READ)
    assert resolve_declared_tool_policy(read_default, "other", None, None) == (
        ResolvedToolPolicy(ToolEffect.READ, False)
    )
    assert resolve_declared_tool_policy(read_default, "other", None, True) == (
        ResolvedToolPolicy(ToolEffect.READ, True)
    )


def test_fixed_policies_of_built_in_and_unknown_tools() -> None:
    assert ResolvedToolPolicy(ToolEffect.READ, False) == BUILT_IN_TOOL_POLICY
    assert ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False) == UNKNOWN_TOOL_POLICY


@pytest.mark.parametrize("bad", ["", None, "a/b"])
def test_a_tool_call_id_the_session_cannot_key_is_refused(bad: str | None) -> None:
    with pytest.raises(RuntimeError, match="non-empty ID without '/'"):
        check_model_tool_call_id("lookup", bad)
    assert check_model_tool_call_id("lookup", "call_1") == "call_1"


# --- answers ------------------------------------------------------------------------


def test_each_call_is_answered_from_its_final_record_or_as_outcome_unknown() -> None:
    succeeded = _record("ok", AgentToolCallStatus.SUCCEEDED, output="42")
    failed = _record("bad", AgentToolCallStatus.FAILED, error="boom")
    rejected = _record("no", AgentToolCallStatus.REJECTED, rejection_message="not today")
    open_call = _record("open", AgentToolCallStatus.APPROVED)
    turn = _turn(records=(succeeded, failed, rejected, open_call))

    ok = answer_tool_call(turn, "ok")
    assert (ok.text, ok.is_error, ok.is_rejection) == ("42", False, False)
    bad = answer_tool_call(turn, "bad")
    assert bad.text == describe_tool_call_outcome(failed)
    assert (bad.is_error, bad.is_rejection) == (True, False)
    no = answer_tool_call(turn, "no")
    assert "not today" in no.text
    assert (no.is_error, no.is_rejection) == (True, True)
    for missing in ("open", "never-recorded"):
        answer = answer_tool_call(turn, missing)
        assert answer.text == OUTCOME_UNKNOWN_TOOL_RESULT
        assert answer.status is None
        assert answer.is_error


# --- usage and run state ----------------------------------------------------------------


def test_single_response_usage_counts_one_call_and_fills_missing_counts() -> None:
    assert single_response_usage(input_tokens=10, output_tokens=5) == AgentUsage(
        model_calls=1, input_tokens=10, output_tokens=5, total_tokens=15
    )
    assert single_response_usage(
        input_tokens=None,
        output_tokens=None,
        total_tokens=None,
        cache_read_tokens=None,
        cache_write_tokens=None,
        reasoning_tokens=None,
    ) == AgentUsage(model_calls=1)
    assert single_response_usage(
        input_tokens=100,
        output_tokens=20,
        total_tokens=130,
        cache_read_tokens=60,
        cache_write_tokens=4,
        reasoning_tokens=7,
    ) == AgentUsage(
        model_calls=1,
        input_tokens=100,
        output_tokens=20,
        total_tokens=130,
        cache_read_tokens=60,
        cache_write_tokens=4,
        reasoning_tokens=7,
    )
    with pytest.raises(ValueError):
        single_response_usage(input_tokens=-1, output_tokens=0)


def test_the_model_call_count_round_trips_and_foreign_states_are_refused() -> None:
    assert decode_model_call_count(None) == 0
    for count in (0, 1, 7):
        assert decode_model_call_count(encode_model_call_count(count)) == count
    for foreign in ("not json", "{}", '{"model_calls": -1}', '{"model_calls": "2"}', "[]"):
        with pytest.raises(ValueError, match="model call count"):
            decode_model_call_count(foreign)
    with pytest.raises(ValueError, match="non-negative int"):
        encode_model_call_count(-1)


def test_a_counted_model_step_completes_or_requests_calls_with_the_next_count() -> None:
    message = FrameworkMessage(role="assistant", text="hi", framework_item="{}")
    usage = AgentUsage(model_calls=1, input_tokens=3)
    metadata = ModelCallMetadata(request_model="m")
    completed = counted_model_step_outcome(
        2, new_messages=[message], tool_calls=[], usage=usage, model_call_metadata=metadata
    )
    assert completed == TurnCompleted(
        new_messages=[message], usage=usage, model_call_metadata=metadata
    )
    call = DeferredToolCall("call-1", "lookup", "{}", UNKNOWN_TOOL_POLICY)
    requested = counted_model_step_outcome(
        2, new_messages=[message], tool_calls=[call], usage=usage, model_call_metadata=None
    )
    assert isinstance(requested, ToolCallsRequested)
    assert decode_model_call_count(requested.framework_run_state) == 3
    assert list(requested.tool_calls) == [call]
    assert list(requested.new_messages) == [message]
    assert requested.usage == usage
    assert requested.model_call_metadata is None


def test_a_tool_the_runner_does_not_have_fails_the_call_for_the_model() -> None:
    tools = {"lookup": "the lookup tool"}
    assert known_tool(tools, "lookup") == "the lookup tool"
    with pytest.raises(ToolExecutionError) as raised:
        known_tool(tools, "refund")
    assert raised.value.message == "unknown tool refund"


def test_tool_arguments_must_be_a_json_object_the_model_can_fix() -> None:
    assert tool_arguments_object('{"order_id": "42"}') == {"order_id": "42"}
    assert tool_arguments_object("  ") == {}
    with pytest.raises(ToolExecutionError, match="not valid JSON"):
        tool_arguments_object("{order")
    with pytest.raises(ToolExecutionError, match="must be a JSON object, got list"):
        tool_arguments_object("[1]")
