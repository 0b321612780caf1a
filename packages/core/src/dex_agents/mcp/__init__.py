"""MCP tools in agent sessions: ``McpToolSource`` on the official ``mcp`` SDK.

Every MCP tool call runs in its own tool Step with an effect from the tool's
annotations, and carries the session's idempotency key in ``_meta``. Needs the
``dex-agents[mcp]`` extra.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "dex_agents.mcp needs the MCP SDK: install the extra with "
        "`pip install 'dex-agents[mcp]'` (or `uv add 'dex-agents[mcp]'`)"
    ) from error

from dex_agents.mcp.config import (
    McpHttpServer,
    McpServerConfig,
    McpStdioServer,
    load_mcp_server_configs,
)
from dex_agents.mcp.naming import (
    MCP_IDEMPOTENCY_KEY_META_KEY,
    mcp_tool_name,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.mcp.resource_tools import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
)
from dex_agents.mcp.source import (
    McpTaskPollError,
    McpTool,
    McpToolCallInterruptedError,
    McpToolSource,
)
from dex_agents.mcp.tasks import TASKS_EXTENSION_ID

__all__ = [
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_IDEMPOTENCY_KEY_META_KEY",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "TASKS_EXTENSION_ID",
    "McpHttpServer",
    "McpServerConfig",
    "McpStdioServer",
    "McpTaskPollError",
    "McpTool",
    "McpToolCallInterruptedError",
    "McpToolSource",
    "load_mcp_server_configs",
    "mcp_tool_name",
    "tool_effect_from_mcp_tool_annotations",
]
