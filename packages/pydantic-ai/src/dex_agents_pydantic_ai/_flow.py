"""``create_pydantic_ai_session_flow``: the session Flow of a Pydantic AI agent."""

from __future__ import annotations

from typing import Any, Literal, TypeVar, Unpack

from pydantic_ai import Agent

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionOptionValues,
    create_agent_session_flow,
)
from dex_agents.runner import ToolTaskPollers, ToolTasksOption
from dex_agents_pydantic_ai._runner import DepsFactory, ModelResolver, PydanticAIRunner

__all__ = ["create_pydantic_ai_session_flow"]

DepsT = TypeVar("DepsT")


def create_pydantic_ai_session_flow(
    agent: Agent[DepsT, Any],
    flow_type: str,
    options: AgentSessionOptions | None = None,
    *,
    deps: DepsT | None = None,
    deps_factory: DepsFactory[DepsT] | None = None,
    stream_text: bool = False,
    tool_tasks: ToolTasksOption = None,
    resolve_model: ModelResolver | None = None,
    planning_tool_choice: Literal["auto", "required"] = "auto",
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs ``agent`` with a ``PydanticAIRunner``.

    ``options`` (or the same fields as keywords, such as ``tool_policies=``) are
    the session options. The agent's deps come from ``deps`` or from
    ``deps_factory(session_id)``, called for each model step and tool call, in
    whichever Worker runs it; they are never stored in the session. A factory
    that returns an async context manager is entered for the Step and exited
    when the Step ends. With ``stream_text``, model requests are streamed and
    their text reaches the live events as it arrives.

    ``resolve_model`` maps a turn's session settings to the model of its requests,
    summary requests included. With ``plan_mode_enabled=True`` (and ``write_todos`` in
    ``built_in_tools``) a planning turn offers only ``write_todos``;
    ``planning_tool_choice="required"`` forces it on the turn's first request.
    """
    runner = PydanticAIRunner(
        agent,
        deps=deps,
        deps_factory=deps_factory,
        stream_text=stream_text,
        resolve_model=resolve_model,
        planning_tool_choice=planning_tool_choice,
    )
    runner.tool_tasks = ToolTaskPollers(tool_tasks)
    return create_agent_session_flow(runner, flow_type, options, **session_options)
