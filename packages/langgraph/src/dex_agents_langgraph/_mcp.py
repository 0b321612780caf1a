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
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from dex_agents_langgraph._tools import dex_tool_metadata, idempotency_key_of

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_source_tools"]


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[StructuredTool]:
    """``tools`` (listed by ``source``) as LangChain tools that run through ``source``.

    Each declares the effect the server's annotations give (none leaves the session's
    default). Pass ``tool_tasks={tool.name: source for tool in tools}`` (with your other
    pollers) to the Flow factory so their MCP tasks are polled durably.
    """
    return [_structured_tool(source, tool) for tool in tools]


def _structured_tool(source: McpToolSource, tool: McpTool) -> StructuredTool:
    async def invoke(config: RunnableConfig, **arguments: Any) -> str:
        key = idempotency_key_of(config)
        return await source.call_tool(tool.name, arguments, idempotency_key=key)

    wrapped = StructuredTool.from_function(
        coroutine=invoke,
        name=tool.name,
        description=tool.description,
        args_schema=dict(tool.parameters),
    )
    if tool.effect is not None:
        wrapped.metadata = dex_tool_metadata(tool.effect, requires_approval=tool.requires_approval)
    return wrapped
