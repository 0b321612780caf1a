"""AgentHost's option groups: frozen dataclasses that refuse a bad value where it is written."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from dex_agents import (
    AgentHost,
    AgentSessionFlow,
    EmbeddedEngineOptions,
    SdkPatches,
    WorkerTuning,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.values import FrameworkMessage, empty_agent_usage


class _Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=(), usage=empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("unused")


def _flows() -> AgentSessionFlow:
    return create_agent_session_flow(_Runner(), "HostOptions")


def test_the_defaults_are_what_a_host_used_without_options() -> None:
    assert EmbeddedEngineOptions() == EmbeddedEngineOptions(
        placement="loop", transport="in-process"
    )
    assert WorkerTuning() == WorkerTuning(
        max_concurrent_tasks=16, registration_timeout=timedelta(seconds=60)
    )
    assert SdkPatches() == SdkPatches(memoize_sdk_version=True, keep_pull_streams=True)


@pytest.mark.parametrize("option", [EmbeddedEngineOptions(), WorkerTuning(), SdkPatches()])
def test_an_option_group_is_frozen_and_keyword_only(option: object) -> None:
    field = dataclasses.fields(option)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(option, field, None)
    with pytest.raises(TypeError):
        type(option)(None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda: EmbeddedEngineOptions(placement="process"),  # type: ignore[arg-type]
            ValueError,
            r"EmbeddedEngineOptions\.placement must be one of loop, thread, not 'process'",
        ),
        (
            lambda: EmbeddedEngineOptions(transport="socket"),  # type: ignore[arg-type]
            ValueError,
            r"EmbeddedEngineOptions\.transport must be one of in-process, grpc, not 'socket'",
        ),
        (
            lambda: WorkerTuning(max_concurrent_tasks=1),
            ValueError,
            r"WorkerTuning\.max_concurrent_tasks must be at least 2 \(one is kept for RPCs\)",
        ),
        (
            lambda: WorkerTuning(max_concurrent_tasks=True),
            TypeError,
            r"WorkerTuning\.max_concurrent_tasks must be an int, not bool",
        ),
        (
            lambda: WorkerTuning(registration_timeout=timedelta(0)),
            ValueError,
            r"WorkerTuning\.registration_timeout must be a positive timedelta",
        ),
        (
            lambda: WorkerTuning(registration_timeout=60),  # type: ignore[arg-type]
            ValueError,
            r"WorkerTuning\.registration_timeout must be a positive timedelta, not 60",
        ),
        (
            lambda: SdkPatches(memoize_sdk_version="yes"),  # type: ignore[arg-type]
            TypeError,
            r"SdkPatches\.memoize_sdk_version must be a bool, not str",
        ),
        (
            lambda: SdkPatches(keep_pull_streams=None),  # type: ignore[arg-type]
            TypeError,
            r"SdkPatches\.keep_pull_streams must be a bool, not NoneType",
        ),
    ],
)
def test_a_bad_field_fails_with_a_message_that_names_it(
    build: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        build()  # type: ignore[operator]


def test_the_host_takes_each_group_only_as_its_own_type() -> None:
    with pytest.raises(TypeError, match="worker_tuning must be a WorkerTuning or None, got"):
        AgentHost(_flows(), worker_tuning=SdkPatches())  # type: ignore[arg-type]
    host = AgentHost(
        _flows(),
        engine_options=EmbeddedEngineOptions(placement="thread"),
        worker_tuning=WorkerTuning(max_concurrent_tasks=3),
        sdk_patches=SdkPatches(memoize_sdk_version=False),
    )
    assert host.engine_options.placement == "thread"
    assert host.worker_tuning.max_concurrent_tasks == 3
    assert host.sdk_patches == SdkPatches(memoize_sdk_version=False)
