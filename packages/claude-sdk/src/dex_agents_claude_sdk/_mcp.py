"""MCP tools in a Claude session: the tools of a ``dex_agents.mcp.McpToolSource``.

``mcp_source_tools(source, tools)`` wraps each listed tool with ``claude_tool(handler,
name=..., description=..., input_schema=...)`` and the effect the server's annotations
give; the handler calls ``source.call_tool`` from its tool Step. There the source runs
the call as the Step's own: the ``tools/call`` carries the idempotency key and the
``traceparent`` in ``_meta``, and a task of a Streamable HTTP server is handed to
``PollToolTask`` (the handler raises the source's ``StartedToolTask``) when the Flow's
``tool_tasks`` names the source for the tool; the polls then ask the task's input
requests as session questions, and ``cancel_turn`` sends ``tasks/cancel``. The tools
are deferred, given their policy (``call_policy``), and run in their tool Step like any
other (``dex_agents_claude_sdk._tools``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dex_agents.runner import get_deferred_tool_execution
from dex_agents_claude_sdk._tools import ClaudeTool, claude_tool

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_source_tools"]


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[ClaudeTool]:
    """``tools`` (listed by ``source``) as ``ClaudeTool`` objects that run through ``source``.

    Each declares the effect the server's annotations give (none leaves the session's
    default). Pass ``tool_tasks={tool.name: source for tool in tools}`` (with your other
    pollers) to the Flow factory so their MCP tasks are polled durably.
    """
    return [_source_tool(source, tool) for tool in tools]


def _source_tool(source: McpToolSource, tool: McpTool) -> ClaudeTool:
    async def handler(**arguments: Any) -> str:
        key = get_deferred_tool_execution().idempotency_key
        return await source.call_tool(tool.name, arguments, idempotency_key=key)

    return claude_tool(
        handler,
        effect=tool.effect,
        requires_approval=tool.requires_approval,
        name=tool.name,
        description=tool.description,
        input_schema=tool.parameters,
    )
