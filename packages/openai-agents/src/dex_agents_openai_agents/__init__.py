"""Run an OpenAI Agents SDK agent as a durable dex-agents session.

``create_openai_agents_session_flow(agent, flow_type)`` wraps an
``agents.Agent``: each ``RunModel`` makes one model call and stops before any
function tool runs; each tool call runs in its own Step.
"""

from importlib.metadata import version as _version

from dex_agents.runner import MOVED_TO_DEX_AGENTS as _MOVED_TO_DEX_AGENTS
from dex_agents.runner import deprecated_aliases as _deprecated_aliases
from dex_agents.runner import warn_if_off_version_line
from dex_agents_openai_agents._flow import create_openai_agents_session_flow
from dex_agents_openai_agents._mcp import mcp_source_tools
from dex_agents_openai_agents._runner import (
    ContextFactory,
    OpenAIAgentsRunner,
    ResolveModel,
    UnsupportedInterruptionError,
)
from dex_agents_openai_agents._tools import ToolDeclaration, declare_tool_effect

__version__ = _version("dex-agents-openai-agents")
warn_if_off_version_line("dex-agents-openai-agents")

__all__ = [
    "ContextFactory",
    "OpenAIAgentsRunner",
    "ResolveModel",
    "ToolDeclaration",
    "UnsupportedInterruptionError",
    "__version__",
    "create_openai_agents_session_flow",
    "declare_tool_effect",
    "mcp_source_tools",
]

__getattr__ = _deprecated_aliases(__name__, _MOVED_TO_DEX_AGENTS)
