"""``create_langgraph_session_flow``: the session Flow of a LangGraph agent."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.pregel import Pregel

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionOptionValues,
    create_agent_session_flow,
)
from dex_agents.runner import ToolTaskPollers, ToolTasksOption
from dex_agents_langgraph._runner import GraphResolver, LangGraphRunner, ModelResolver

__all__ = ["create_langgraph_agent_session_flow", "create_langgraph_session_flow"]


def create_langgraph_session_flow(
    agent: BaseChatModel | Pregel[Any, Any, Any, Any],
    flow_type: str,
    options: AgentSessionOptions | None = None,
    *,
    tools: Sequence[BaseTool] | None = None,
    system_prompt: str | None = None,
    bind_tools_options: Mapping[str, Any] | None = None,
    messages_key: str = "messages",
    tool_tasks: ToolTasksOption = None,
    resolve_model: ModelResolver | None = None,
    resolve_graph: GraphResolver | None = None,
    planning_tool_choice: Literal["auto", "required"] = "auto",
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs a LangGraph agent.

    ``agent`` is a chat model (the runner calls ``model.bind_tools(tools)`` once
    per model step, with ``system_prompt`` in front) or a compiled agent graph
    with ``interrupt_before=["tools"]`` (``tools`` default to its ``"tools"``
    node). Session options go in ``options`` or as keywords (``tool_policies=``,
    ``default_tool_effect=``, ``interrupt_deadline=``, ``plan_mode_enabled=``, ...).

    ``resolve_model`` maps a turn's session settings to the chat model of its calls,
    summary calls included (a graph's summary calls only); ``resolve_graph`` maps them
    to the graph of a graph agent's model steps. ``planning_tool_choice="required"``
    forces ``write_todos`` on a planning turn's first call (chat model only).
    """
    if isinstance(agent, BaseChatModel):
        if messages_key != "messages":
            raise ValueError(
                "messages_key applies to a graph; the model's one-node graph sets its own"
            )
        if resolve_graph is not None:
            raise ValueError("resolve_graph applies to a graph; pass resolve_model instead")
        runner = LangGraphRunner.from_chat_model(
            agent,
            tools or (),
            system_prompt=system_prompt,
            bind_tools_options=bind_tools_options,
            resolve_model=resolve_model,
            planning_tool_choice=planning_tool_choice,
        )
    elif isinstance(agent, Pregel):  # pyright: ignore[reportUnnecessaryIsInstance]
        if system_prompt is not None or bind_tools_options is not None:
            raise ValueError(
                "system_prompt and bind_tools_options apply to a chat model; a graph sets its own"
            )
        if planning_tool_choice != "auto":
            raise ValueError(
                "planning_tool_choice applies to a chat model: a graph binds its model to its"
                " tools itself, so it has no plan mode"
            )
        runner = LangGraphRunner(
            agent,
            tools,
            messages_key=messages_key,
            resolve_graph=resolve_graph,
            resolve_model=resolve_model,
        )
    else:
        raise TypeError(
            "agent must be a LangChain chat model (BaseChatModel) or a compiled LangGraph"
            f" graph, got {type(agent).__name__}"
        )
    runner.tool_tasks = ToolTaskPollers(tool_tasks)
    return create_agent_session_flow(runner, flow_type, options, **session_options)


def create_langgraph_agent_session_flow(
    flow_type: str,
    *,
    model: BaseChatModel | None = None,
    graph: Pregel[Any, Any, Any, Any] | None = None,
    tools: Sequence[BaseTool] | None = None,
    system_prompt: str | None = None,
    bind_tools_options: Mapping[str, Any] | None = None,
    messages_key: str = "messages",
    options: AgentSessionOptions | None = None,
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """Deprecated: use ``create_langgraph_session_flow(model_or_graph, flow_type, ...)``."""
    warnings.warn(
        "create_langgraph_agent_session_flow(flow_type, model=|graph=) is deprecated; use"
        " create_langgraph_session_flow(model_or_graph, flow_type)",
        DeprecationWarning,
        stacklevel=2,
    )
    if (model is None) == (graph is None):
        raise ValueError("pass exactly one of model= (a chat model) and graph= (a compiled graph)")
    agent = model if model is not None else graph
    assert agent is not None
    return create_langgraph_session_flow(
        agent,
        flow_type,
        options,
        tools=tools,
        system_prompt=system_prompt,
        bind_tools_options=bind_tools_options,
        messages_key=messages_key,
        **session_options,
    )
