"""Run Claude through Anthropic's Python SDK (Messages API) as a durable dex-agents session.

``create_claude_agent_session_flow(flow_type, model=..., tools=...)`` builds the
session Flow: every model call is one streamed ``messages`` request in its own
``RunModel`` Step, and every ``tool_use`` runs in its own tool Step.
"""

from importlib.metadata import version as _version

from dex_agents_claude_sdk.flow import create_claude_agent_session_flow
from dex_agents_claude_sdk.runner import (
    DEFAULT_MAX_TOKENS,
    ClaudeAgentRunner,
    ClaudeModelStep,
    current_model_step,
)
from dex_agents_claude_sdk.tools import (
    ClaudeTool,
    claude_tool,
    current_idempotency_key,
    current_tool_execution,
)

__version__ = _version("dex-agents-claude-sdk")

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ClaudeAgentRunner",
    "ClaudeModelStep",
    "ClaudeTool",
    "__version__",
    "claude_tool",
    "create_claude_agent_session_flow",
    "current_idempotency_key",
    "current_model_step",
    "current_tool_execution",
]
