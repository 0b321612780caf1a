"""The runner contract's helpers, and the order a tool Step keeps before a tool runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dex_agents import (
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ModelCallMetadata,
    ResolvedToolPolicy,
    ToolExecutionError,
    ToolExecutionResult,
    TurnCompleted,
    model_call_metadata,
)
from dex_agents.session._tools import CallTool
from dex_agents.values import FrameworkMessage, add_agent_usage, empty_agent_usage


def test_model_call_metadata_keeps_what_the_framework_exposes() -> None:
    metadata = model_call_metadata(request_model="gpt-5", finish_reasons=["stop"])
    assert metadata == ModelCallMetadata(request_model="gpt-5", finish_reasons=("stop",))
    assert model_call_metadata() == ModelCallMetadata()
    outcome = TurnCompleted(
        new_messages=(), usage=empty_agent_usage(), model_call_metadata=metadata
    )
    assert outcome.kind == "completed"


def test_usage_sums_field_by_field_and_refuses_negative_counts() -> None:
    one = AgentUsage(model_calls=1, input_tokens=3, output_tokens=2, total_tokens=5)
    two = AgentUsage(model_calls=1, input_tokens=1, cache_read_tokens=4, reasoning_tokens=6)
    assert add_agent_usage(one, two) == AgentUsage(
        model_calls=2,
        input_tokens=4,
        output_tokens=2,
        total_tokens=5,
        cache_read_tokens=4,
        reasoning_tokens=6,
    )
    assert empty_agent_usage() == AgentUsage()
    with pytest.raises(ValueError, match="input_tokens must not be negative"):
        AgentUsage(input_tokens=-1)


def test_tool_policy_checks_its_fields() -> None:
    assert ToolPolicy(ToolEffect.READ).requires_approval is None
    with pytest.raises(TypeError, match=r"ToolPolicy\.effect must be a ToolEffect"):
        ToolPolicy("read")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="requires_approval must be a bool"):
        ToolPolicy(ToolEffect.READ, "no")  # type: ignore[arg-type]


def test_tool_execution_error_carries_its_message() -> None:
    error = ToolExecutionError("card declined")
    assert error.message == "card declined"
    assert str(error) == "card declined"


def _record(**changes: Any) -> AgentToolCall:
    values: dict[str, Any] = {
        "tool_call_id": "c1",
        "turn_id": "turn-3",
        "tool_name": "lookup",
        "arguments": "{}",
        "effect": ToolEffect.READ,
        "requires_approval": False,
        "status": AgentToolCallStatus.APPROVED,
        "deferral_order": 0,
    }
    values.update(changes)
    return AgentToolCall(**values)


def test_turn_context_reads_its_records_and_policies() -> None:
    async def beat() -> None:
        return None

    done = _record(status=AgentToolCallStatus.SUCCEEDED, output="ok")
    turn = AgentTurnContext(
        flow_id="s",
        turn_id="turn-3",
        attempt=1,
        messages=(),
        framework_run_state="state",
        tool_calls=(done,),
        events=None,  # type: ignore[arg-type]
        cancellation=None,  # type: ignore[arg-type]
        deadline=datetime.now(UTC),
        step_execution_id="RunModel-2",
        tool_policies={"send": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)},
        default_tool_effect=ToolEffect.UNCLASSIFIED,
        heartbeat=beat,
    )
    assert turn.is_resuming
    assert turn.recorded_tool_call("c1") == done
    assert turn.recorded_tool_call("c2") is None
    send = turn.resolve_tool_policy("send", ToolEffect.READ)
    assert (send.effect, send.requires_approval) == (ToolEffect.IDEMPOTENT_WRITE, True)
    other = turn.resolve_tool_policy("other", ToolEffect.READ)
    assert (other.effect, other.requires_approval) == (ToolEffect.READ, False)
    unknown = turn.resolve_tool_policy("unknown")
    assert (unknown.effect, unknown.requires_approval) == (ToolEffect.UNCLASSIFIED, True)
    as_text = turn.resolve_tool_policy("other", "idempotent_write")
    assert (as_text.effect, as_text.requires_approval) == (ToolEffect.IDEMPOTENT_WRITE, False)
    with pytest.raises(ValueError, match="unknown tool effect 'write'; use one of 'read'"):
        turn.resolve_tool_policy("other", "write")


def test_resolved_policy_checks_its_fields() -> None:
    with pytest.raises(TypeError, match=r"ResolvedToolPolicy\.effect must be a ToolEffect"):
        ResolvedToolPolicy("read", False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="requires_approval must be a bool"):
        ResolvedToolPolicy(ToolEffect.READ, None)  # type: ignore[arg-type]


# --- a tool Step has output out before the tool runs: its tool_call_started event, or a
# heartbeat when the event was dropped ----


class _Log:
    def __init__(self) -> None:
        self.entries: list[str] = []


class _Context:
    flow_id = "session-1"
    attempt = 1

    def __init__(self, log: _Log) -> None:
        self._log = log

    async def heartbeat(self, *value: object) -> None:
        self._log.entries.append("heartbeat")

    def has_last_heartbeat_value(self) -> bool:
        return False

    def is_cancellation_requested(self) -> bool:
        return False


class _Events:
    def __init__(self, log: _Log, *, dropped: bool) -> None:
        self._log = log
        self._dropped = dropped
        self.written = 0

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        if self._dropped:
            self._log.entries.append("event dropped")
            return
        self.written += 1
        self._log.entries.append(f"tool_call_started {tool_call_id}")


class _Runner:
    def __init__(self, log: _Log) -> None:
        self.log = log
        self.calls: list[DeferredToolExecution] = []

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: Any) -> TurnCompleted:
        return TurnCompleted(new_messages=(), usage=empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.calls.append(call)
        self.log.entries.append("tool ran")
        return ToolExecutionResult("ok")


@pytest.mark.parametrize(
    ("dropped", "before_the_tool"),
    [(False, ["tool_call_started c1"]), (True, ["event dropped", "heartbeat"])],
)
async def test_a_tool_step_has_output_out_before_the_tool_runs(
    dropped: bool, before_the_tool: list[str]
) -> None:
    log = _Log()
    runner = _Runner(log)
    flow = create_agent_session_flow(runner, "OrderAgent")
    step = CallTool(flow.session)
    events = _Events(log, dropped=dropped)
    changes = await step._run(_Context(log), _record(), events)  # type: ignore[arg-type]
    assert log.entries[: len(before_the_tool) + 1] == [*before_the_tool, "tool ran"]
    call = runner.calls[0]
    assert call.idempotency_key == "session-1/turn-3/c1"
    assert call.heartbeat_checkpoint is None
    assert changes.written_records[0].status is AgentToolCallStatus.SUCCEEDED
    assert changes.completed_tool_calls == ["c1"]
