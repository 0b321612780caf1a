"""MCP tools in agent sessions: ``McpToolSource`` on the official ``mcp`` SDK.

Every MCP tool call runs in its own tool Step with an effect from the tool's
annotations, and carries the session's idempotency key in ``_meta``. Needs the
``dex-agents[mcp]`` extra.

Every public name is imported from here; the modules inside are private (the old
paths ``dex_agents.mcp.source``, ``.config``, ``.naming``, ``.resource_tools`` and
``.tasks`` still work for this release, with a ``DeprecationWarning``).
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "dex_agents.mcp needs the MCP SDK: install the extra with "
        "`pip install 'dex-agents[mcp]'` (or `uv add 'dex-agents[mcp]'`)"
    ) from error

from dex_agents.mcp._calls import McpToolCallInterruptedError, tool_call_meta
from dex_agents.mcp._config import (
    McpHttpServer,
    McpServerConfig,
    McpStdioServer,
    load_mcp_server_configs,
)
from dex_agents.mcp._listing import McpTool
from dex_agents.mcp._naming import (
    MCP_IDEMPOTENCY_KEY_META_KEY,
    mcp_tool_name,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.mcp._resource_tools import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    RESOURCE_AND_PROMPT_TOOL_NAMES,
)
from dex_agents.mcp._source import McpToolSource
from dex_agents.mcp._task_calls import McpTaskPollError
from dex_agents.mcp._tasks import TASKS_EXTENSION_ID

__all__ = [
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_IDEMPOTENCY_KEY_META_KEY",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "RESOURCE_AND_PROMPT_TOOL_NAMES",
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
    "tool_call_meta",
    "tool_effect_from_mcp_tool_annotations",
]
