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
from typing import TYPE_CHECKING

from dex_agents_claude_sdk._tools import ClaudeTool, claude_tool

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_source_tools"]


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[ClaudeTool]:
    """``tools`` (listed by ``source``) as ``ClaudeTool`` objects; see the module docstring.
    Name ``source`` as their poller: ``tool_tasks={t.name: source ...}``."""
    return [
        claude_tool(
            source.tool_function(tool.name),
            effect=tool.effect,
            requires_approval=tool.requires_approval,
            name=tool.name,
            description=tool.description,
            input_schema=tool.parameters,
        )
        for tool in tools
    ]
