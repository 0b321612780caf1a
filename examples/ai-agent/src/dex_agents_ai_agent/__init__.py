"""The AI Agent web app: a durable general-purpose agent in the browser, on dex-agents."""

from dex_agents_ai_agent.agent import create_ai_agent_flow
from dex_agents_ai_agent.app import create_app
from dex_agents_ai_agent.tools import ToolCatalog, load_mcp_config

__all__ = ["ToolCatalog", "create_ai_agent_flow", "create_app", "load_mcp_config"]
