"""The session's idempotency key on every ``tools/call`` of the agent's own MCP servers.

The adapter runs an MCP tool of ``Agent(mcp_servers=...)`` in its tool Step. Each
server gets a ``tool_meta_resolver`` that adds the running call's key to ``_meta``
(under ``io.superdurable.dex/idempotencyKey``) after whatever the user's resolver
returns, so a retried write reaches the server with the same key.
"""

from __future__ import annotations

import inspect
from typing import Any

from agents import Agent

from dex_agents.adapter_support import mcp_idempotency_meta

__all__ = ["stamp_mcp_idempotency_keys"]

_STAMPED = "_dex_agents_stamps_idempotency_keys"


def stamp_mcp_idempotency_keys(agent: Agent[Any]) -> None:
    """Give each of ``agent``'s MCP servers the key-adding resolver, once."""
    for server in agent.mcp_servers:
        if getattr(server, _STAMPED, False) or not hasattr(server, "tool_meta_resolver"):
            continue
        inner: Any = getattr(server, "tool_meta_resolver", None)

        async def resolver(context: Any, inner: Any = inner) -> dict[str, Any] | None:
            meta: dict[str, Any] = {}
            if inner is not None:
                resolved = inner(context)
                if inspect.isawaitable(resolved):
                    resolved = await resolved
                meta.update(resolved or {})
            meta.update(mcp_idempotency_meta() or {})
            return meta or None

        server.tool_meta_resolver = resolver  # pyright: ignore[reportAttributeAccessIssue]
        setattr(server, _STAMPED, True)
