"""Run Claude through Anthropic's Python SDK (Messages API) as a durable dex-agents session.

``create_claude_agent_session_flow(flow_type, model=..., tools=...)`` builds the
session Flow: every model call is one streamed ``messages`` request in its own
``RunModel`` Step, and every ``tool_use`` runs in its own tool Step.
"""

from importlib.metadata import version as _version

from dex_agents.adapter_support import (
    current_deferred_tool_execution,
    current_model_step_context,
    get_deferred_tool_execution,
    get_model_step_context,
)
from dex_agents.versions import warn_if_off_version_line
from dex_agents_claude_sdk.flow import create_claude_agent_session_flow
from dex_agents_claude_sdk.runner import DEFAULT_MAX_TOKENS, ClaudeAgentRunner
from dex_agents_claude_sdk.tools import ClaudeTool, claude_tool

__version__ = _version("dex-agents-claude-sdk")
warn_if_off_version_line("dex-agents-claude-sdk")

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ClaudeAgentRunner",
    "ClaudeTool",
    "__version__",
    "claude_tool",
    "create_claude_agent_session_flow",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "get_deferred_tool_execution",
    "get_model_step_context",
]
