"""The testing export carries what the contract's testing export does: ``ScriptedModelClient``
(the Stepwise class itself) and test Workers with 8 task slots."""

from __future__ import annotations

import inspect

from dex_agents import WorkerTuning, testing
from dex_agents import models as stepwise_models
from dex_agents.testing._worker_process import (
    TEST_WORKER_MAX_CONCURRENT_TASKS,
    serve_until_signalled,
)


def test_the_scripted_model_client_is_the_stepwise_class() -> None:
    assert testing.ScriptedModelClient is stepwise_models.ScriptedModelClient
    assert testing.ScriptedModelReply is stepwise_models.ScriptedModelReply
    assert testing.ScriptedToolCall is stepwise_models.ScriptedToolCall
    assert {"ScriptedModelClient", "ScriptedModelReply", "ScriptedToolCall"} <= set(testing.__all__)


def _default(function: object, name: str) -> object:
    return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]


def test_test_workers_have_8_task_slots_and_the_host_keeps_16() -> None:
    assert TEST_WORKER_MAX_CONCURRENT_TASKS == 8
    assert _default(testing.run_agent_worker_process, "max_concurrent_tasks") == 8
    assert _default(serve_until_signalled, "max_concurrent_tasks") == 8
    assert _default(testing.AgentTestEnvironment.start, "max_concurrent_tasks") == 8
    assert WorkerTuning().max_concurrent_tasks == 16  # AgentHost(worker_tuning=...)


async def test_an_environment_s_in_process_worker_runs_8_task_slots() -> None:
    from dex_agents.testing._probe_flow import ProbeFlow

    environment = await testing.AgentTestEnvironment.start(
        flows=[ProbeFlow()], worker_in_process=True
    )
    async with environment:
        assert environment.host.worker_tuning.max_concurrent_tasks == 8
