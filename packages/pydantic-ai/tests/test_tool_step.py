"""A tool Step runs the tool through Pydantic AI's ToolManager, not through an agent run.

``Agent.iter`` is spied on (and still delegates), so each test can tell whether
running the deferred call started an agent run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.capabilities import Hooks
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from dex_agents.runner import ToolExecutionError, ToolExecutionResult
from dex_agents.testing import RunnerDriver as Session
from dex_agents_pydantic_ai import IDEMPOTENCY_KEY_METADATA_KEY, PydanticAIRunner


@dataclass
class Seen:
    """What the tool saw of its RunContext, per call."""

    contexts: list[dict[str, Any]]


def script(*parts: ToolCallPart) -> FunctionModel:
    responses = [ModelResponse(parts=list(parts))]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return responses.pop(0)

    return FunctionModel(respond)


def counting_agent_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets one entry per ``Agent.iter`` call from now on."""
    runs: list[int] = []
    real_iter: Callable[..., AbstractAsyncContextManager[Any]] = Agent.iter  # pyright: ignore[reportAssignmentType]

    @asynccontextmanager
    async def iter_counted(self: Agent[Any, Any], *args: Any, **kwargs: Any) -> AsyncGenerator[Any]:
        runs.append(1)
        async with real_iter(self, *args, **kwargs) as run:
            yield run

    monkeypatch.setattr(Agent, "iter", iter_counted)
    return runs


async def after_the_model_step(
    agent: Agent[Seen, str], seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> tuple[Session[PydanticAIRunner[Seen]], list[int]]:
    """A session whose model step deferred the script's calls, and the agent-run counter."""
    session = Session(PydanticAIRunner(agent, deps=seen))
    session.start_turn("count")
    await session.run_model()
    return session, counting_agent_runs(monkeypatch)


async def execute(session: Session[PydanticAIRunner[Seen]], call_id: str) -> Any:
    return await session.runner.execute_deferred_tool_call(
        session.execution(session.record(call_id))
    )


def probe_agent(model: FunctionModel, **agent_options: Any) -> Agent[Seen, str]:
    agent = Agent(model, deps_type=Seen, **agent_options)

    @agent.tool
    def probe(ctx: RunContext[Seen], count: int) -> str:
        """Record the context."""
        ctx.deps.contexts.append(
            {
                "tool_call_id": ctx.tool_call_id,
                "tool_name": ctx.tool_name,
                "retry": ctx.retry,
                "max_retries": ctx.max_retries,
                "approved": ctx.tool_call_approved,
                "key": (ctx.metadata or {}).get(IDEMPOTENCY_KEY_METADATA_KEY),
                "conversation_id": ctx.conversation_id,
            }
        )
        if count < 0:
            raise ModelRetry("count must not be negative")
        return f"counted {count}"

    return agent


async def test_a_tool_step_runs_the_tool_without_an_agent_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = Seen([])
    agent = probe_agent(
        script(
            ToolCallPart("probe", {"count": 3}, tool_call_id="c1"),
            ToolCallPart("probe", {"count": -1}, tool_call_id="c2"),
            ToolCallPart("probe", {"count": "many"}, tool_call_id="c3"),
        ),
        retries=3,
    )
    session, runs = await after_the_model_step(agent, seen, monkeypatch)

    result = await execute(session, "c1")
    with pytest.raises(ToolExecutionError) as retried:
        await execute(session, "c2")
    with pytest.raises(ToolExecutionError) as invalid:
        await execute(session, "c3")

    assert runs == []  # no agent run, so no model request either
    assert result == ToolExecutionResult("counted 3")
    assert "count must not be negative" in retried.value.message
    assert "valid integer" in invalid.value.message  # Pydantic AI's argument validation
    assert seen.contexts == [
        {
            "tool_call_id": call_id,
            "tool_name": "probe",
            "retry": 0,
            "max_retries": 3,  # the agent's retries= reach the tool's context
            "approved": True,
            "key": f"s-1/turn-1/{call_id}",
            "conversation_id": "s-1",
        }
        for call_id in ["c1", "c2"]
    ]


async def test_a_retry_past_the_tools_budget_fails_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = Seen([])
    agent = probe_agent(script(ToolCallPart("probe", {"count": -1}, tool_call_id="c1")), retries=0)
    session, runs = await after_the_model_step(agent, seen, monkeypatch)

    with pytest.raises(ToolExecutionError, match="exceeded max retries count of 0"):
        await execute(session, "c1")

    assert runs == []


async def test_an_agent_with_tool_hooks_runs_the_tool_in_an_agent_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hooks = Hooks[Seen]()
    hooked: list[str] = []

    @hooks.on.before_tool_execute
    async def note(  # pyright: ignore[reportUnusedFunction]
        ctx: RunContext[Seen], *, call: ToolCallPart, tool_def: ToolDefinition, args: dict[str, Any]
    ) -> dict[str, Any]:
        hooked.append(call.tool_call_id)
        return {**args, "count": args["count"] + 1}

    seen = Seen([])
    agent = probe_agent(
        script(ToolCallPart("probe", {"count": 3}, tool_call_id="c1")), capabilities=[hooks]
    )
    session, runs = await after_the_model_step(agent, seen, monkeypatch)

    result = await execute(session, "c1")

    assert runs == [1]  # the capability's hook needs the run
    assert hooked == ["c1"]
    assert result == ToolExecutionResult("counted 4")


async def test_a_runner_that_saw_no_model_step_runs_the_tool_in_an_agent_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A Worker that restarted between the model step and the tool Step: Pydantic AI
    # publishes the run's default tool retries only on a run's context, so the first
    # tool Step of this process takes the agent run and the tool sees the same context.
    seen = Seen([])
    agent = probe_agent(script(ToolCallPart("probe", {"count": 3}, tool_call_id="c1")), retries=3)
    session, runs = await after_the_model_step(agent, seen, monkeypatch)
    restarted = PydanticAIRunner(agent, deps=seen)

    result = await restarted.execute_deferred_tool_call(session.execution(session.record("c1")))

    assert runs == [1]
    assert result == ToolExecutionResult("counted 3")
    assert seen.contexts[-1]["max_retries"] == 3
    assert seen.contexts[-1]["key"] == "s-1/turn-1/c1"
