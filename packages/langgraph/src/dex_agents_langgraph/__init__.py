"""Run a LangGraph / LangChain agent as a durable dex-agents session.

``create_langgraph_agent_session_flow(flow_type, model=..., tools=...)`` builds
the session Flow of a chat model with LangChain tools;
``create_langgraph_agent_session_flow(flow_type, graph=...)`` that of a prebuilt
agent graph compiled with ``interrupt_before=["tools"]``. Every model call is
one ``RunModel`` Step and every tool call its own tool Step.
"""

from importlib.metadata import version as _version

from dex_agents.adapter_support import (
    current_deferred_tool_execution,
    current_model_step_context,
    get_deferred_tool_execution,
    get_model_step_context,
)
from dex_agents.versions import warn_if_off_version_line
from dex_agents_langgraph.flow import create_langgraph_agent_session_flow
from dex_agents_langgraph.policies import (
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    declare_tool_effect,
    dex_tool_metadata,
)
from dex_agents_langgraph.runner import (
    DEX_TOOL_EXECUTION_KEY,
    IDEMPOTENCY_KEY_CONFIG_KEY,
    LangGraphAgentRunner,
    idempotency_key_of,
    tool_execution_of,
)

__version__ = _version("dex-agents-langgraph")
warn_if_off_version_line("dex-agents-langgraph")

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "DEX_TOOL_EXECUTION_KEY",
    "IDEMPOTENCY_KEY_CONFIG_KEY",
    "LangGraphAgentRunner",
    "__version__",
    "create_langgraph_agent_session_flow",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "declare_tool_effect",
    "dex_tool_metadata",
    "get_deferred_tool_execution",
    "get_model_step_context",
    "idempotency_key_of",
    "tool_execution_of",
]
