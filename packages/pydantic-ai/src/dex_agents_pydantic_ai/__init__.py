"""Run a Pydantic AI agent as a durable dex-agents session.

Wrap the ``Agent`` you have (its model, instructions, tools, toolsets and deps)
with ``create_pydantic_ai_agent_session_flow``: every model request and every
tool call then runs in its own Dex Step. See the package README.
"""

from importlib.metadata import version as _version

from dex_agents.versions import warn_if_off_version_line
from dex_agents_pydantic_ai.flow import create_pydantic_ai_agent_session_flow
from dex_agents_pydantic_ai.policies import (
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    dex_tool_metadata,
)
from dex_agents_pydantic_ai.runner import PydanticAIRunner
from dex_agents_pydantic_ai.session_context import (
    IDEMPOTENCY_KEY_METADATA_KEY,
    current_deferred_tool_execution,
    current_model_step_context,
    get_deferred_tool_execution,
    get_model_step_context,
)

__version__ = _version("dex-agents-pydantic-ai")
warn_if_off_version_line("dex-agents-pydantic-ai")

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "PydanticAIRunner",
    "__version__",
    "create_pydantic_ai_agent_session_flow",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "dex_tool_metadata",
    "get_deferred_tool_execution",
    "get_model_step_context",
]
