"""Run a Pydantic AI agent as a durable dex-agents session.

Wrap the ``Agent`` you have (its model, instructions, tools, toolsets and deps)
with ``create_pydantic_ai_session_flow``: every model request and every
tool call then runs in its own Dex Step. See the package README and the
Pydantic AI page of the documentation site (docs/runners/pydantic-ai.md).
"""

from importlib.metadata import version as _version

from dex_agents.runner import MOVED_TO_DEX_AGENTS as _MOVED_TO_DEX_AGENTS
from dex_agents.runner import deprecated_aliases as _deprecated_aliases
from dex_agents.runner import warn_if_off_version_line
from dex_agents_pydantic_ai._flow import create_pydantic_ai_session_flow
from dex_agents_pydantic_ai._mcp import mcp_source_tools
from dex_agents_pydantic_ai._runner import DepsFactory, ModelResolver, PydanticAIRunner
from dex_agents_pydantic_ai._tools import (
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    IDEMPOTENCY_KEY_METADATA_KEY,
    ask_user,
    declare_tool_effect,
    dex_tool_metadata,
)

__version__ = _version("dex-agents-pydantic-ai")
warn_if_off_version_line("dex-agents-pydantic-ai")

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "DepsFactory",
    "ModelResolver",
    "PydanticAIRunner",
    "__version__",
    "ask_user",
    "create_pydantic_ai_session_flow",
    "declare_tool_effect",
    "dex_tool_metadata",
    "mcp_source_tools",
]

__getattr__ = _deprecated_aliases(
    __name__,
    {
        "create_pydantic_ai_agent_session_flow": (
            "create_pydantic_ai_session_flow",
            create_pydantic_ai_session_flow,
        ),
        **_MOVED_TO_DEX_AGENTS,
    },
)
