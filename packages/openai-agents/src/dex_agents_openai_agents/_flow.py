"""``create_openai_agents_session_flow``: the session Flow of an OpenAI Agents SDK agent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from agents import Agent, RunConfig

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionOptionValues,
    create_agent_session_flow,
)
from dex_agents.runner import ToolTaskPollers, ToolTasksOption
from dex_agents.stepwise import DEFAULT_MAX_MODEL_CALLS_PER_TURN
from dex_agents_openai_agents._runner import (
    ContextFactory,
    OpenAIAgentsRunner,
    PlanningToolChoice,
    ResolveModel,
)

__all__ = ["create_openai_agents_session_flow"]


def create_openai_agents_session_flow(
    agent: Agent[Any],
    flow_type: str,
    options: AgentSessionOptions | None = None,
    *,
    run_config: RunConfig | None = None,
    context_factory: ContextFactory | None = None,
    sdk_tracing: bool = False,
    max_turns: int | None = DEFAULT_MAX_MODEL_CALLS_PER_TURN,
    tool_tasks: ToolTasksOption = None,
    handoff_agents: Sequence[Agent[Any]] = (),
    planning_tool_choice: PlanningToolChoice = "auto",
    resolve_model: ResolveModel | None = None,
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs ``agent`` with an ``OpenAIAgentsRunner``.

    ``options`` (or the same fields as keywords, such as ``tool_policies=``) are
    the session options (tool policies, default effect, interrupt deadline,
    built-in tools, event stream capacity). ``run_config``,
    ``context_factory``, ``max_turns`` (model calls per session turn), ``handoff_agents``
    (the agents only ``handoff(...)`` objects lead to), ``planning_tool_choice``
    (``"required"`` forces ``write_todos`` on a planning turn's first model call; a model
    that refuses a forced tool choice is a ``ValueError`` here),
    ``resolve_model`` (the model of a turn's model calls, summary calls included, from its
    session settings) and ``sdk_tracing`` (the runner's ``tracing``: the OpenAI Agents SDK's
    own traces) go to the runner; SDK tracing is off unless you turn it on. The session's
    OpenTelemetry spans are the ``tracing`` session option.
    """
    runner = OpenAIAgentsRunner(
        agent,
        run_config=run_config,
        context_factory=context_factory,
        tracing=sdk_tracing,
        max_turns=max_turns,
        handoff_agents=handoff_agents,
        planning_tool_choice=planning_tool_choice,
        resolve_model=resolve_model,
    )
    runner.tool_tasks = ToolTaskPollers(tool_tasks)
    return create_agent_session_flow(runner, flow_type, options, **session_options)
