"""One ``tools/call`` to an MCP server, and the resource and prompt tools.

What a call's outcome means for the session: an answer is the output, an ``isError``
result or a JSON-RPC error is a ``ToolExecutionError``, and a call that was sent and
broke off is ``McpToolCallInterruptedError`` (a Step failure, decided by effect).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import mcp_types
from mcp import MCPError
from mcp_types import CallToolResult

from dex_agents._adapter_support import current_deferred_tool_execution
from dex_agents.mcp._connections import (
    Connections,
    OnTask,
    PooledSession,
    ServerConfig,
    describe,
    on_task_of_this_call,
    reset_on_task,
)
from dex_agents.mcp._listing import TaskSupport
from dex_agents.mcp._naming import MCP_IDEMPOTENCY_KEY_META_KEY
from dex_agents.mcp._resource_tools import run_resource_or_prompt_tool
from dex_agents.mcp._tasks import legacy_task_call, uses_legacy_tasks
from dex_agents.runner import AgentEventWriter, CancellationSignal, ToolExecutionError
from dex_agents.tracing import current_traceparent

__all__ = [
    "CallHandedOver",
    "McpToolCallInterruptedError",
    "Progress",
    "ToolReference",
    "abortable",
    "parse_arguments",
    "result_text",
    "run_resource_or_prompt",
    "send_tool_call",
    "tool_call_meta",
]

TRACEPARENT_META_KEY = "traceparent"
"""The ``_meta`` key of the W3C trace context of a ``tools/call``."""
_BROKE_OFF = frozenset({mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT})
"""What the SDK answers for a sent request that broke off or timed out: it may have run."""
_CANCELLATION_POLL_SECONDS = 0.2
_T = TypeVar("_T")


class McpToolCallInterruptedError(Exception):
    """A sent ``tools/call`` ended without an answer the session can trust.

    A Step failure, not a ``ToolExecutionError``: ``CallTool`` sends a ``read`` or
    ``idempotent_write`` call again with the same idempotency key; any other effect
    records ``outcome_unknown``.
    """


class CallHandedOver(Exception):
    """Ends a ``tools/call`` whose outcome another Step takes over (a started task)."""


@dataclass(frozen=True)
class ToolReference:
    """Where a stored call goes: the server, the tool's MCP name and its task support."""

    server: str
    tool: str
    task_support: TaskSupport = "forbidden"

    def encode(self) -> str:
        return json.dumps(
            {"server": self.server, "task_support": self.task_support, "tool": self.tool},
            separators=(",", ":"),
        )

    @staticmethod
    def decode(text: str | None) -> ToolReference | None:
        try:
            value: Any = json.loads(text) if text is not None else None
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        fields: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        server = fields.get("server")
        tool = fields.get("tool")
        support = fields.get("task_support", "forbidden")
        if not isinstance(server, str) or not isinstance(tool, str):
            return None
        if support not in ("forbidden", "optional", "required"):
            support = "forbidden"
        return ToolReference(server, tool, support)


@dataclass
class Progress:
    """Writes ``mcp.tool_progress`` events for one call."""

    events: AgentEventWriter | None
    tool_call_id: str | None
    tool_name: str
    sent: int = field(default=0)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self.events is None:
            return
        self.sent += 1
        self.events.write_event(
            "mcp.tool_progress",
            {
                "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name,
                "progress": progress,
                "total": total,
                "message": message,
            },
        )


async def send_tool_call(
    connections: Connections,
    server: ServerConfig,
    reference: ToolReference,
    arguments: dict[str, Any],
    *,
    idempotency_key: str | None,
    progress: Progress,
    cancellation: CancellationSignal | None,
    deadline: datetime | None,
    task_ttl_ms: int,
    on_task: OnTask,
    meta: Mapping[str, Any] | None = None,
) -> str:
    """Send ``tools/call`` on the server's pooled session and return the output text.

    ``_meta`` carries the idempotency key and any ``meta`` (such as the ``traceparent``).
    """
    sent_meta: dict[str, Any] = dict(meta or {})
    if idempotency_key:
        sent_meta[MCP_IDEMPOTENCY_KEY_META_KEY] = idempotency_key
    timeout = (deadline - datetime.now(UTC)).total_seconds() if deadline is not None else None

    async def attempt(pooled: PooledSession) -> CallToolResult:
        # Declaring the tasks extension lets the server run the call as a task.
        token = on_task_of_this_call(on_task)
        try:
            if uses_legacy_tasks(pooled.session, reference.task_support):
                # 2025-11-25: the client asks for the task (``task: {ttl}``).
                params: dict[str, Any] = {"name": reference.tool, "arguments": arguments}
                if sent_meta:
                    params["_meta"] = sent_meta
                created = await legacy_task_call(pooled.channel, params, task_ttl_ms, timeout)
                if isinstance(created, CallToolResult):
                    return created
                return await on_task(created, pooled.session)
            return await pooled.client.call_tool(
                reference.tool,
                arguments,
                read_timeout_seconds=timeout if timeout is None else max(timeout, 1.0),
                progress_callback=progress,
                meta=sent_meta or None,  # pyright: ignore[reportArgumentType]
            )
        finally:
            reset_on_task(token)

    async def request() -> CallToolResult:
        try:
            # A connection that cannot be opened raises ToolExecutionError: never sent.
            return await connections.run(server, attempt)
        except (ToolExecutionError, McpToolCallInterruptedError, CallHandedOver):
            raise
        except MCPError as error:
            if error.code == mcp_types.INTERNAL_ERROR:
                raise McpToolCallInterruptedError(
                    f"MCP server {server.name} answered tools/call {reference.tool} "
                    f"with an internal error: {error.error.message}"
                ) from error
            if error.code in _BROKE_OFF:
                raise McpToolCallInterruptedError(
                    f"tools/call {reference.tool} to MCP server {server.name} was sent "
                    f"and broke off: {error.error.message}"
                ) from error
            raise ToolExecutionError(error.error.message) from error
        except Exception as error:
            raise McpToolCallInterruptedError(
                f"tools/call {reference.tool} to MCP server {server.name} was sent "
                f"and broke off: {describe(error)}"
            ) from error

    result = await abortable(request(), cancellation)
    text = result_text(result)
    if result.is_error:
        raise ToolExecutionError(text or f"MCP tool {reference.tool} failed")
    return text


async def run_resource_or_prompt(
    connections: Connections,
    servers: dict[str, ServerConfig],
    tool_name: str,
    arguments: dict[str, Any],
) -> str:
    """Run one of the resource and prompt tools against the server it names."""
    server_name = arguments.get("server")
    if not isinstance(server_name, str) or server_name not in servers:
        raise ToolExecutionError(f"no MCP server named {server_name!r} is configured")

    async def read(pooled: PooledSession) -> str:
        return await run_resource_or_prompt_tool(tool_name, arguments, pooled.client)

    try:
        return await connections.run(servers[server_name], read)
    except (MCPError, ValueError) as error:
        message = error.error.message if isinstance(error, MCPError) else str(error)
        raise ToolExecutionError(message) from error


async def abortable(request: Awaitable[_T], cancellation: CancellationSignal | None) -> _T:
    """Run ``request``, aborting it when the tool Step's cancellation fires."""
    task = asyncio.ensure_future(request)
    if cancellation is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_CANCELLATION_POLL_SECONDS)
            if done:
                return task.result()
            if cancellation.is_cancelled():
                task.cancel()
                raise McpToolCallInterruptedError("the tool Step was cancelled during the call")
    finally:
        if not task.done():
            task.cancel()


def parse_arguments(text: str) -> dict[str, Any]:
    """The model's tool arguments as a JSON object; anything else is a ``ToolExecutionError``."""
    try:
        value: Any = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise ToolExecutionError(f"the tool arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("the tool arguments must be a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]


def result_text(result: CallToolResult) -> str:
    """Text blocks joined with newlines, other content as JSON."""
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
        else:
            parts.append(
                json.dumps(
                    block.model_dump(mode="json", by_alias=True, exclude_none=True),
                    sort_keys=True,
                )
            )
    return "\n".join(parts)


def trace_meta() -> dict[str, Any]:
    """``{"traceparent": ...}`` of the current span (the tool call's ``execute_tool``).

    Empty without OpenTelemetry or a valid current span: tracing never fails a call.
    """
    traceparent = current_traceparent()
    return {TRACEPARENT_META_KEY: traceparent} if traceparent else {}


def tool_call_meta() -> dict[str, Any]:
    """The ``_meta`` a framework's own MCP ``tools/call`` sends from a session tool Step.

    The session's idempotency key (under ``MCP_IDEMPOTENCY_KEY_META_KEY``) and the
    ``traceparent`` of the Step's ``execute_tool`` span, as ``McpToolSource`` sends them;
    each only when there is one. Merge it over the framework's own ``_meta``.
    """
    meta: dict[str, Any] = trace_meta()
    execution = current_deferred_tool_execution()
    if execution is not None:
        meta[MCP_IDEMPOTENCY_KEY_META_KEY] = execution.idempotency_key
    return meta
