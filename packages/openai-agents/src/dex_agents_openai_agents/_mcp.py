"""The agent's own MCP servers under the session: their tools' effect and idempotency keys.

The adapter defers an MCP tool of ``Agent(mcp_servers=...)`` like a function tool.
Its effect comes from the server's annotations when the tool declares none
(``mcp_annotation_effect``): ``readOnlyHint`` is ``read`` and ``idempotentHint`` is
``idempotent_write``, as in ``dex_agents.mcp``.

The adapter runs the tool in its tool Step. Each server gets a
``tool_meta_resolver`` that adds the running call's key to ``_meta`` (under
``io.superdurable.dex/idempotencyKey``) after whatever the user's resolver returns,
so a retried write reaches the server with the same key.
"""

from __future__ import annotations

import inspect
from typing import Any

from agents import Agent, FunctionTool

from dex_agents import ToolEffect
from dex_agents.runner import mcp_idempotency_meta

__all__ = ["mcp_annotation_effect", "stamp_mcp_idempotency_keys"]


def mcp_annotation_effect(tool: FunctionTool) -> ToolEffect | None:
    """The effect an MCP tool's annotations give, or ``None`` (the session's default applies)."""
    # A public property since openai-agents 0.24; older releases keep MCP annotations to
    # themselves, so their MCP tools declare nothing (the session's defaults apply).
    annotations: object = getattr(tool, "mcp_annotations", None)
    if annotations is None:
        return None
    # MCP annotations are the server's hints; only the two clear ones are taken. The
    # attribute names follow the installed MCP SDK (snake_case in 2.x, camelCase before).
    if _hint(annotations, "read_only_hint", "readOnlyHint"):
        return ToolEffect.READ
    if _hint(annotations, "idempotent_hint", "idempotentHint"):
        return ToolEffect.IDEMPOTENT_WRITE
    return None


def _hint(annotations: object, *names: str) -> bool:
    return any(getattr(annotations, name, None) is True for name in names)


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
