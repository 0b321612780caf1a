"""The agent's own MCP toolsets under the session: their effect and idempotency keys.

An MCP server's tool (``MCPToolset``) carries its annotations in its metadata:
``readOnlyHint`` is ``read`` and ``idempotentHint`` is ``idempotent_write``, as in
``dex_agents.mcp`` (``mcp_annotation_effect``); a tool's own declaration wins.

The tool Step runs an ``MCPToolset`` tool through Pydantic AI. Each such toolset gets
a ``process_tool_call`` hook that adds the running call's key to the request's
``_meta`` (under ``io.superdurable.dex/idempotencyKey``); a hook of your own still
runs, and its metadata is kept.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from dex_agents import ToolEffect
from dex_agents.runner import mcp_idempotency_meta

__all__ = ["mcp_annotation_effect", "stamp_mcp_idempotency_keys"]


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
        async def keyed(
            name: str, args: dict[str, Any], *, metadata: dict[str, Any] | None = None
        ) -> Any:
            return await call_tool(
                name, args, metadata={**(metadata or {}), **(mcp_idempotency_meta() or {})}
            )

        if inner is not None:
            return await inner(ctx, keyed, name, args)
        return await keyed(name, args)

    toolset.process_tool_call = process  # pyright: ignore[reportAttributeAccessIssue]
    setattr(toolset, _STAMPED, True)
