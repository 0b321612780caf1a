"""Run a LangGraph / LangChain agent as a durable dex-agents session.

``create_langgraph_session_flow(model, flow_type, tools=...)`` builds the session
Flow of a chat model with LangChain tools; ``create_langgraph_session_flow(graph,
flow_type)`` that of a prebuilt agent graph compiled with
``interrupt_before=["tools"]``. Every model call is one ``RunModel`` Step and
every tool call its own tool Step.
"""

from importlib.metadata import version as _version

from dex_agents.runner import MOVED_TO_DEX_AGENTS as _MOVED_TO_DEX_AGENTS
from dex_agents.runner import deprecated_aliases as _deprecated_aliases
from dex_agents.runner import warn_if_off_version_line
from dex_agents_langgraph._flow import (
    create_langgraph_agent_session_flow as _create_langgraph_agent_session_flow,
)
from dex_agents_langgraph._flow import create_langgraph_session_flow
from dex_agents_langgraph._mcp import mcp_source_tools
from dex_agents_langgraph._runner import LangGraphRunner
from dex_agents_langgraph._tools import (
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    DEX_TOOL_EXECUTION_KEY,
    IDEMPOTENCY_KEY_CONFIG_KEY,
    declare_tool_effect,
    dex_tool_metadata,
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
    "LangGraphRunner",
    "__version__",
    "create_langgraph_session_flow",
    "declare_tool_effect",
    "dex_tool_metadata",
    "idempotency_key_of",
    "mcp_source_tools",
    "tool_execution_of",
]

__getattr__ = _deprecated_aliases(
    __name__,
    {
        "LangGraphAgentRunner": ("LangGraphRunner", LangGraphRunner),
        "create_langgraph_agent_session_flow": (
            "create_langgraph_session_flow(model_or_graph, flow_type)",
            _create_langgraph_agent_session_flow,
        ),
        **_MOVED_TO_DEX_AGENTS,
    },
)
