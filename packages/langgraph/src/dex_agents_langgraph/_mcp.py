"""MCP tools in a LangGraph session: the tools of a ``dex_agents.mcp.McpToolSource``.

``mcp_source_tools(source, tools)`` wraps each listed tool as a schema-only
``StructuredTool`` that declares the tool's effect and calls ``source.call_tool`` from
its tool Step. There the source runs the call as the Step's own: the ``tools/call``
carries the idempotency key and the ``traceparent`` in ``_meta``, and a task of a
Streamable HTTP server is handed to ``PollToolTask`` (the tool raises the source's
``StartedToolTask``) when the Flow's ``tool_tasks`` names the source for the tool;
the polls then ask the task's input requests as session questions, and ``cancel_turn``
sends ``tasks/cancel``. A tool of ``langchain-mcp-adapters`` is an ordinary tool: it
runs in its tool Step, but its tasks and questions are its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from langchain_core.tools import StructuredTool

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_source_tools"]


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[StructuredTool]:
    """``tools`` (listed by ``source``) as schema-only LangChain tools; see the module
    docstring. Name ``source`` as their poller: ``tool_tasks={t.name: source ...}``."""
    return [
        StructuredTool.from_function(
            coroutine=source.tool_function(tool.name),
            name=tool.name,
            description=tool.description,
            args_schema=dict(tool.parameters),
            metadata=tool.declaration_metadata(),
        )
        for tool in tools
    ]
