"""``create_langgraph_agent_session_flow``: the session Flow of a LangGraph agent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.pregel import Pregel

from dex_agents.session import AgentSessionFlow, create_agent_session_flow
from dex_agents.session.options import AgentSessionOptions
from dex_agents_langgraph.runner import LangGraphAgentRunner

__all__ = ["create_langgraph_agent_session_flow"]


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
    **session_options: Any,
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs a LangGraph agent.

    Pass either ``model`` (a chat model; the runner calls ``model.bind_tools(tools)``
    once per model step, with ``system_prompt`` in front) or ``graph`` (a compiled
    agent graph with ``interrupt_before=["tools"]``; ``tools`` default to its
    ``"tools"`` node). Session options go in ``options`` or as keywords
    (``tool_policies=``, ``default_tool_effect=``, ``interrupt_deadline=``, ...).
    """
    if (model is None) == (graph is None):
        raise ValueError("pass exactly one of model= (a chat model) and graph= (a compiled graph)")
    if graph is not None:
        if system_prompt is not None or bind_tools_options is not None:
            raise ValueError(
                "system_prompt and bind_tools_options apply to model=; a graph sets its own"
            )
        runner = LangGraphAgentRunner(graph, tools, messages_key=messages_key)
    else:
        assert model is not None
        if messages_key != "messages":
            raise ValueError(
                "messages_key applies to graph=; the model's one-node graph sets its own"
            )
        runner = LangGraphAgentRunner.from_chat_model(
            model,
            tools or (),
            system_prompt=system_prompt,
            bind_tools_options=bind_tools_options,
        )
    return create_agent_session_flow(runner, flow_type, options, **session_options)
