"""The session's idempotency key on every ``tools/call`` of the agent's own MCP toolsets.

The tool Step runs an ``MCPToolset`` tool through Pydantic AI. Each such toolset gets
a ``process_tool_call`` hook that adds the running call's key to the request's
``_meta`` (under ``io.superdurable.dex/idempotencyKey``); a hook of your own still
runs, and its metadata is kept.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.toolsets import AbstractToolset

from dex_agents.adapter_support import mcp_idempotency_meta

__all__ = ["stamp_mcp_idempotency_keys"]

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
