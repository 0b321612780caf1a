"""Run Claude through Anthropic's Python SDK (Messages API) as a durable dex-agents session.

``create_claude_session_flow(model, flow_type, tools=...)`` builds the
session Flow: every model call is one streamed ``messages`` request in its own
``RunModel`` Step, and every ``tool_use`` runs in its own tool Step.
"""

from importlib.metadata import version as _version

from dex_agents.runner import MOVED_TO_DEX_AGENTS as _MOVED_TO_DEX_AGENTS
from dex_agents.runner import deprecated_aliases as _deprecated_aliases
from dex_agents.runner import warn_if_off_version_line
from dex_agents_claude_sdk._flow import (
    create_claude_agent_session_flow as _create_claude_agent_session_flow,
)
from dex_agents_claude_sdk._flow import create_claude_session_flow
from dex_agents_claude_sdk._mcp import mcp_source_tools
from dex_agents_claude_sdk._runner import (
    DEFAULT_MAX_TOKENS,
    ClaudeRunner,
    ClientFactory,
    ResolveModel,
)
from dex_agents_claude_sdk._tools import ClaudeTool, claude_tool, declare_tool_effect

__version__ = _version("dex-agents-claude-sdk")
warn_if_off_version_line("dex-agents-claude-sdk")

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ClaudeRunner",
    "ClaudeTool",
    "ClientFactory",
    "ResolveModel",
    "__version__",
    "claude_tool",
    "create_claude_session_flow",
    "declare_tool_effect",
    "mcp_source_tools",
]

__getattr__ = _deprecated_aliases(
    __name__,
    {
        "ClaudeAgentRunner": ("ClaudeRunner", ClaudeRunner),
        "create_claude_agent_session_flow": (
            "create_claude_session_flow(model, flow_type)",
            _create_claude_agent_session_flow,
        ),
        **_MOVED_TO_DEX_AGENTS,
    },
)
