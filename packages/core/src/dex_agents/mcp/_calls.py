"""One ``tools/call`` to an MCP server, and the resource and prompt tools.

What a call's outcome means for the session: an answer is the output, an ``isError``
result or a JSON-RPC error is a ``ToolExecutionError``, and a call that was sent and
broke off is ``McpToolCallInterruptedError`` (a Step failure, decided by effect).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from mcp import MCPError
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from dex_agents.mcp._connections import Connections, ServerConfig, describe
from dex_agents.mcp._listing import TaskSupport
from dex_agents.mcp._naming import MCP_IDEMPOTENCY_KEY_META_KEY
from dex_agents.mcp._resource_tools import run_resource_or_prompt_tool
from dex_agents.mcp._tasks import (
    CreatedTask,
    TaskChannel,
    TaskClaim,
    legacy_task_call,
    uses_legacy_tasks,
)
from dex_agents.runner import AgentEventWriter, CancellationSignal, ToolExecutionError

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
]

_INTERNAL_ERROR = -32603
_CANCELLATION_POLL_SECONDS = 0.2
_T = TypeVar("_T")

OnTask = Callable[[CreatedTask, ClientSession], Awaitable[CallToolResult]]
"""What to do with a task the server created for the call: drive it to its result, or
raise ``CallHandedOver``."""


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
) -> str:
    """Send ``tools/call`` and return the output text."""
    meta = {MCP_IDEMPOTENCY_KEY_META_KEY: idempotency_key} if idempotency_key else None
    timeout = (deadline - datetime.now(UTC)).total_seconds() if deadline is not None else None

    async def request() -> CallToolResult:
        sent = False
        # Only a tool that lists ``execution.taskSupport`` (2025-11-25) can need it.
        channel = TaskChannel() if reference.task_support != "forbidden" else None
        try:
            # Declaring the tasks extension lets the server run the call as a task.
            async with connections.client(server, TaskClaim(on_task), channel=channel) as client:
                sent = True
                if channel is not None and uses_legacy_tasks(
                    client.session, reference.task_support
                ):
                    # 2025-11-25: the client asks for the task (``task: {ttl}``).
                    params = {"name": reference.tool, "arguments": arguments}
                    if meta is not None:
                        params["_meta"] = meta
                    created = await legacy_task_call(channel, params, task_ttl_ms, timeout)
                    if isinstance(created, CallToolResult):
                        return created
                    return await on_task(created, client.session)
                return await client.call_tool(
                    reference.tool,
                    arguments,
                    read_timeout_seconds=timeout if timeout is None else max(timeout, 1.0),
                    progress_callback=progress,
                    meta=meta,  # pyright: ignore[reportArgumentType]
                )
        except (ToolExecutionError, McpToolCallInterruptedError, CallHandedOver):
            raise
        except MCPError as error:
            if error.code == _INTERNAL_ERROR:
                raise McpToolCallInterruptedError(
                    f"MCP server {server.name} answered tools/call {reference.tool} "
                    f"with an internal error: {error.error.message}"
                ) from error
            raise ToolExecutionError(error.error.message) from error
        except Exception as error:
            if not sent:
                raise  # ToolExecutionError: the call never left
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
    async with connections.client(servers[server_name]) as client:
        try:
            return await run_resource_or_prompt_tool(tool_name, arguments, client)
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
