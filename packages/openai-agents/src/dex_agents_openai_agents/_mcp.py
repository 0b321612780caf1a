"""MCP tools under the session: the agent's own MCP servers, and the tools of a
``dex_agents.mcp.McpToolSource``.

The adapter defers an MCP tool of ``Agent(mcp_servers=...)`` like a function tool.
Its effect comes from the server's annotations when the tool declares none
(``mcp_annotation_effect``): ``readOnlyHint`` is ``read`` and ``idempotentHint`` is
``idempotent_write``, as in ``dex_agents.mcp``.

The adapter runs the tool in its tool Step. Each server gets a
``tool_meta_resolver`` that adds the running call's key to ``_meta`` (under
``io.superdurable.dex/idempotencyKey``) and the ``traceparent`` of the tool Step's span
after whatever the user's resolver returns, so a retried write reaches the server with
the same key. The SDK's MCP client speaks no tasks extension, so such a tool's work is
done within its call.

``mcp_source_tools(source, tools)`` wraps each tool of an ``McpToolSource`` as a
``FunctionTool`` that calls ``source.call_tool`` from its tool Step, where the source
runs the call as the Step's own: a task of a Streamable HTTP server is handed to
``PollToolTask`` when the Flow's ``tool_tasks`` names the source for the tool, its input
requests become session questions, and ``cancel_turn`` sends ``tasks/cancel``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agents import Agent, FunctionTool
from agents.tool_context import ToolContext

from dex_agents import ToolEffect
from dex_agents.runner import get_deferred_tool_execution

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = ["mcp_annotation_effect", "mcp_source_tools", "stamp_mcp_idempotency_keys"]


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
            # An MCP server's call: the MCP SDK is there, so is dex_agents.mcp.
            from dex_agents.mcp import tool_call_meta

            meta: dict[str, Any] = {}
            if inner is not None:
                resolved = inner(context)
                if inspect.isawaitable(resolved):
                    resolved = await resolved
                meta.update(resolved or {})
            meta.update(tool_call_meta())
            return meta or None

        server.tool_meta_resolver = resolver  # pyright: ignore[reportAttributeAccessIssue]
        setattr(server, _STAMPED, True)


def mcp_source_tools(source: McpToolSource, tools: Iterable[McpTool]) -> list[FunctionTool]:
    """``tools`` (listed by ``source``) as ``FunctionTool`` objects; see the module
    docstring. Name ``source`` as their poller: ``tool_tasks={t.name: source ...}``."""
    from dex_agents_openai_agents._tools import declare_tool_effect  # it imports this module

    tools_of_source: list[FunctionTool] = []
    for tool in tools:

        async def invoke(context: ToolContext[Any], arguments: str, name: str = tool.name) -> str:
            del context  # the model's arguments go on as JSON text, checked by the source
            key = get_deferred_tool_execution().idempotency_key
            return await source.call_tool(name, arguments, idempotency_key=key)

        wrapped = FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=dict(tool.parameters),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )
        if tool.effect is not None:
            declare_tool_effect(wrapped, tool.effect, requires_approval=tool.requires_approval)
        tools_of_source.append(wrapped)
    return tools_of_source
