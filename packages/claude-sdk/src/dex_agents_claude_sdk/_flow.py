"""``create_claude_session_flow``: the session Flow of a Claude agent (``anthropic`` SDK)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionOptionValues,
    create_agent_session_flow,
)
from dex_agents.runner import ToolTaskPollers, ToolTasksOption
from dex_agents_claude_sdk._runner import (
    DEFAULT_MAX_TOKENS,
    ClaudeRunner,
    ClientFactory,
    PlanningToolChoice,
    ResolveModel,
)
from dex_agents_claude_sdk._tools import ToolLike

__all__ = ["create_claude_agent_session_flow", "create_claude_session_flow"]


def create_claude_session_flow(
    model: str,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    *,
    tools: Sequence[ToolLike] = (),
    system_prompt: str | Sequence[Mapping[str, Any]] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    thinking: Mapping[str, Any] | None = None,
    temperature: float | None = None,
    request_options: Mapping[str, Any] | None = None,
    client_factory: ClientFactory | None = None,
    api_key_env: str = "ANTHROPIC_API_KEY",
    tool_tasks: ToolTasksOption = None,
    planning_tool_choice: PlanningToolChoice = "auto",
    resolve_model: ResolveModel | None = None,
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs Claude ``model`` with ``tools``.

    Each ``RunModel`` makes one streamed Messages API request to ``model``.
    ``client_factory`` builds the ``anthropic.AsyncAnthropic`` client in each
    Worker process; without it the key comes from ``api_key_env``.
    ``planning_tool_choice="required"`` forces ``write_todos`` on a planning turn's first
    model call (a model that refuses a forced tool choice is a ``ValueError`` here);
    ``resolve_model`` chooses the model of a turn's requests from its session settings.
    Session options go in ``options`` or as keywords (``tool_policies=``,
    ``interrupt_deadline=``, ...).
    """
    runner = ClaudeRunner(
        model,
        tools=tools,
        system_prompt=system_prompt,
        max_tokens=max_tokens,
        thinking=thinking,
        temperature=temperature,
        request_options=request_options,
        client_factory=client_factory,
        api_key_env=api_key_env,
        planning_tool_choice=planning_tool_choice,
        resolve_model=resolve_model,
    )
    runner.tool_tasks = ToolTaskPollers(tool_tasks)
    return create_agent_session_flow(runner, flow_type, options, **session_options)


def create_claude_agent_session_flow(
    flow_type: str,
    *,
    model: str,
    options: AgentSessionOptions | None = None,
    **keywords: Any,
) -> AgentSessionFlow:
    """Deprecated: use ``create_claude_session_flow(model, flow_type, ...)``."""
    warnings.warn(
        "create_claude_agent_session_flow(flow_type, model=) is deprecated; use"
        " create_claude_session_flow(model, flow_type)",
        DeprecationWarning,
        stacklevel=2,
    )
    return create_claude_session_flow(model, flow_type, options, **keywords)
