"""The AI Agent web app: a durable general-purpose agent in the browser, on dex-agents.

The names below load on first use, so a demo MCP server child process
(``python -m dex_agents_ai_agent.demo_mcp_server``) does not import the whole app.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dex_agents_ai_agent.agent import create_ai_agent_flow
    from dex_agents_ai_agent.app import create_app
    from dex_agents_ai_agent.tools import ToolCatalog, load_mcp_config

__all__ = ["ToolCatalog", "create_ai_agent_flow", "create_app", "load_mcp_config"]

_MODULES = {
    "create_ai_agent_flow": "dex_agents_ai_agent.agent",
    "create_app": "dex_agents_ai_agent.app",
    "ToolCatalog": "dex_agents_ai_agent.tools",
    "load_mcp_config": "dex_agents_ai_agent.tools",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)
