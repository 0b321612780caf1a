"""Background heartbeats, session options and the Flow factory's checks, without an engine."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import dex
import pytest

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy, create_agent_session_flow
from dex_agents.runner import ToolExecutionResult, TurnCompleted
from dex_agents.session._heartbeats import BackgroundHeartbeats
from dex_agents.values import FrameworkMessage, empty_agent_usage

_NO_VALUE = object()


class FakeContext:
    """Records heartbeats as an AsyncContext would send them."""

    def __init__(self) -> None:
        self.beats: list[object] = []

    async def heartbeat(self, value: object = _NO_VALUE) -> None:
        self.beats.append(value)


async def test_heartbeats_repeat_and_carry_the_checkpoint() -> None:
    context = FakeContext()
    heartbeats = BackgroundHeartbeats(context, checkpoint="from attempt 1", interval_seconds=0.01)  # type: ignore[arg-type]
    async with heartbeats:
        await asyncio.sleep(0.05)
        await heartbeats.save_checkpoint("job-7")
        await asyncio.sleep(0.05)
    count = len(context.beats)
    await asyncio.sleep(0.03)
    assert len(context.beats) == count  # stopped with the block
    assert context.beats[0] == "from attempt 1"
    assert "job-7" in context.beats
    after = context.beats[context.beats.index("job-7") :]
    assert all(beat == "job-7" for beat in after)
    assert count >= 4


async def test_heartbeats_without_checkpoint_send_no_value() -> None:
    context = FakeContext()
    await BackgroundHeartbeats(context).beat()  # type: ignore[arg-type]
    assert context.beats == [_NO_VALUE]


class Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: Any) -> TurnCompleted:
        return TurnCompleted(new_messages=[], usage=empty_agent_usage())

    async def execute_deferred_tool_call(self, call: Any) -> ToolExecutionResult:
        return ToolExecutionResult("ok")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interrupt_deadline": timedelta(0)}, "interrupt_deadline"),
        ({"event_stream_capacity_bytes": 0}, "event_stream_capacity_bytes"),
        ({"built_in_tools": ("teleport",)}, "unknown built-in tool"),
        ({"built_in_tools": ("ask_user", "ask_user")}, "twice"),
        (
            {
                "built_in_tools": ("ask_user",),
                "tool_policies": {"ask_user": ToolPolicy(ToolEffect.READ)},
            },
            "reserved",
        ),
        ({"max_durable_wait": timedelta(milliseconds=1500)}, "max_durable_wait"),
        ({"tool_policies": {"x": "read"}}, "ToolPolicy"),
        (
            {"tool_policies": [("x", ToolPolicy(ToolEffect.READ))]},
            "tool_policies must be a mapping",
        ),
        ({"built_in_tools": "ask_user"}, "not a string"),
        ({"default_tool_effect": "read"}, "default_tool_effect must be a ToolEffect"),
        ({"interrupt_deadline": 60}, "interrupt_deadline"),
        ({"max_durable_wait": 60}, "max_durable_wait"),
        ({"event_stream_capacity_bytes": True}, "event_stream_capacity_bytes"),
        ({"tool_policy": {}}, "unknown session option 'tool_policy'; the options are"),
    ],
)
def test_bad_options_raise_when_the_flow_is_built(options: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        create_agent_session_flow(Runner(), "Agent", **options)


def test_the_factory_checks_the_runner_and_flow_type() -> None:
    class SyncModel(Runner):
        def run_model_step(self, turn: Any) -> TurnCompleted:  # type: ignore[override]
            return TurnCompleted(new_messages=[], usage=empty_agent_usage())

    with pytest.raises(TypeError, match="run_model_step must be an async method"):
        create_agent_session_flow(SyncModel(), "Agent")
    with pytest.raises(TypeError, match="build_user_message"):
        create_agent_session_flow(object(), "Agent")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="flow_type"):
        create_agent_session_flow(Runner(), "  ")
    with pytest.raises(TypeError, match="options must be AgentSessionOptions"):
        create_agent_session_flow(Runner(), "Agent", {"tool_policies": {}})  # type: ignore[arg-type]


def test_each_flow_owns_its_definitions_and_registers_beside_others() -> None:
    options = AgentSessionOptions(tool_policies={"a": ToolPolicy(ToolEffect.READ)})
    first = create_agent_session_flow(Runner(), "First", options)
    second = create_agent_session_flow(
        Runner(), "Second", options, interrupt_deadline=timedelta(minutes=5)
    )
    assert first.agent_events is not second.agent_events
    assert first.agent_state.name == second.agent_state.name == "AgentState"
    assert second.options.interrupt_deadline == timedelta(minutes=5)
    assert first.options.interrupt_deadline is None
    registry = dex.Registry([first, second], allow_async_handlers=True)
    assert {flow.get_flow_type() for flow in registry.flows} == {"First", "Second"}
    names = {
        definition.name
        for definition in (
            *first.get_persistence_schema().attributes,
            *first.get_persistence_schema().channels,
        )
    }
    assert {
        "AgentState",
        "AgentMessages",
        "FrameworkRunState",
        "AgentToolCalls",
        "PendingInterrupts",
        "AgentUsage",
        "QueuedUserMessages",
        "InterruptResolutions",
        "ToolCallResults",
    } <= names
    assert [stream.name for stream in first.get_persistence_schema().streams] == ["AgentEvents"]
    assert first.agent_events.stream_capacity_bytes == 10 * 1024 * 1024
