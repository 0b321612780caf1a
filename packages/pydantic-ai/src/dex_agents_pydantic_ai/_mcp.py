"""MCP tools under the session: the agent's own MCP toolsets, and the tools of a
``dex_agents.mcp.McpToolSource``.

An MCP server's tool (``MCPToolset``) carries its annotations in its metadata:
``readOnlyHint`` is ``read`` and ``idempotentHint`` is ``idempotent_write``, as in
``dex_agents.mcp`` (``mcp_annotation_effect``); a tool's own declaration wins.

The tool Step runs an ``MCPToolset`` tool through Pydantic AI. Each such toolset gets
a ``process_tool_call`` hook that adds the running call's key to the request's
``_meta`` (under ``io.superdurable.dex/idempotencyKey``) and the ``traceparent`` of the
tool Step's span; a hook of your own still runs, and its metadata is kept. Pydantic AI's
MCP client speaks no tasks extension, so such a tool's work is done within its call.

``mcp_source_tools(source, tools)`` wraps each tool of an ``McpToolSource`` as a
Pydantic AI ``Tool`` that calls ``source.call_tool`` from its tool Step, where the
source runs the call as the Step's own: a task of a Streamable HTTP server is handed to
``PollToolTask`` when the Flow's ``tool_tasks`` names the source for the tool, its input
requests become session questions, and ``cancel_turn`` sends ``tasks/cancel``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from dex_agents import ToolEffect

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_annotation_effect", "mcp_source_tools", "stamp_mcp_idempotency_keys"]


def mcp_annotation_effect(tool: ToolDefinition) -> ToolEffect | None:
    """The effect an MCP tool's annotations give, or ``None`` (the session's default applies)."""
    annotations: Any = (tool.metadata or {}).get("annotations")
    if not isinstance(annotations, dict):
        return None
    hints: dict[str, Any] = annotations  # pyright: ignore[reportUnknownVariableType]
    if hints.get("readOnlyHint") is True:
        return ToolEffect.READ
    if hints.get("idempotentHint") is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None


_STAMPED = "_dex_agents_stamps_idempotency_keys"


def stamp_mcp_idempotency_keys(agent: Agent[Any, Any]) -> None:
    """Give each MCP toolset of ``agent`` the key-adding hook, once."""
    for toolset in agent.toolsets:
        toolset.apply(_stamp)


def _stamp(toolset: AbstractToolset[Any]) -> None:
    # Duck-typed so the adapter imports nothing of pydantic_ai.mcp, which needs the SDK.
    if getattr(toolset, _STAMPED, False) or not hasattr(toolset, "direct_call_tool"):
        return
    if not hasattr(toolset, "process_tool_call"):
        return
    inner: Any = getattr(toolset, "process_tool_call", None)

    async def process(ctx: RunContext[Any], call_tool: Any, name: str, args: dict[str, Any]) -> Any:
        # An MCP toolset's call: the MCP SDK is there, so is dex_agents.mcp.
        from dex_agents.mcp import tool_call_meta

        async def keyed(
            name: str, args: dict[str, Any], *, metadata: dict[str, Any] | None = None
        ) -> Any:
            return await call_tool(name, args, metadata={**(metadata or {}), **tool_call_meta()})

        if inner is not None:
            return await inner(ctx, keyed, name, args)
        return await keyed(name, args)

    toolset.process_tool_call = process  # pyright: ignore[reportAttributeAccessIssue]
    setattr(toolset, _STAMPED, True)


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[Tool[Any]]:
    """``tools`` (listed by ``source``) as Pydantic AI tools; see the module docstring.
    Name ``source`` as their poller: ``tool_tasks={t.name: source ...}``."""
    return [_source_tool(source, tool) for tool in tools]


def _source_tool(source: McpToolSource, tool: McpTool) -> Tool[Any]:
    wrapped = Tool[Any].from_schema(
        source.tool_function(tool.name), tool.name, tool.description, dict(tool.parameters)
    )
    wrapped.metadata = tool.declaration_metadata()
    return wrapped
