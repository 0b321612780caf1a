"""``McpToolSource``: the tools of MCP servers as tools of an agent session.

Every request opens a new connection (handshake within the server's connection
timeout) and closes it afterwards, so no protocol session outlives a request and a
server restart between listing and calling is harmless. Listings are cached per
Worker process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # pyright: ignore[reportPrivateUsage]
from mcp_types import CallToolResult, Implementation

from dex_agents.mcp.config import McpHttpServer, McpStdioServer
from dex_agents.mcp.naming import (
    MCP_IDEMPOTENCY_KEY_META_KEY,
    mcp_tool_name,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.mcp.resource_tools import (
    RESOURCE_AND_PROMPT_TOOL_NAMES,
    resource_and_prompt_tool_definitions,
    run_resource_or_prompt_tool,
)
from dex_agents.models.types import ModelToolCall, ModelToolDefinition
from dex_agents.runner import (
    AgentEventWriter,
    AgentTurnContext,
    CancellationSignal,
    DeferredToolCall,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.values import ToolEffect

__all__ = ["McpTool", "McpToolCallInterruptedError", "McpToolSource"]

logger = logging.getLogger(__name__)

_INTERNAL_ERROR = -32603
_CANCELLATION_POLL_SECONDS = 0.2
_CLIENT_INFO = Implementation(name="dex-agents", version="0.2.0")

ServerConfig = McpStdioServer | McpHttpServer
TaskSupport = Literal["forbidden", "optional", "required"]


class McpToolCallInterruptedError(Exception):
    """A sent ``tools/call`` ended without an answer the session can trust.

    A Step failure, not a ``ToolExecutionError``: ``CallTool`` sends a ``read`` or
    ``idempotent_write`` call again with the same idempotency key; any other effect
    records ``outcome_unknown``.
    """


@dataclass(frozen=True)
class McpTool(ModelToolDefinition):
    """A listed MCP tool: the offered definition plus where and how to call it."""

    server: str = ""
    mcp_name: str = ""
    effect: ToolEffect | None = None
    """From the annotations of a trusted server; ``None`` leaves the default effect."""
    task_support: TaskSupport = "forbidden"


@dataclass
class _Listing:
    """The cached listing of one server."""

    tools: tuple[McpTool, ...] | None = None
    listed_at: float = 0.0
    failed_at: float | None = None
    running: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Reference:
    server: str
    tool: str
    task_support: TaskSupport = "forbidden"

    def encode(self) -> str:
        return json.dumps(
            {"server": self.server, "task_support": self.task_support, "tool": self.tool},
            separators=(",", ":"),
        )

    @staticmethod
    def decode(text: str | None) -> _Reference | None:
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
        return _Reference(server, tool, support)


@dataclass
class _Progress:
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


class McpToolSource:
    """Tools of MCP servers; a Stepwise ``ToolSource`` and a helper for other runners.

    ``servers`` are configured on the Worker only. Tool names are ``<server>__<tool>``;
    key tool policies by that name.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        source_name: str = "mcp",
        resource_and_prompt_tools_enabled: bool = False,
        listing_ttl_seconds: float = 300.0,
        listing_failure_backoff_seconds: float = 30.0,
        connection_attempts: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"McpToolSource got two servers with one name: {names}")
        if connection_attempts < 1:
            raise ValueError("connection_attempts must be at least 1")
        self._servers: dict[str, ServerConfig] = {server.name: server for server in servers}
        self._source_name = source_name
        self._resource_and_prompt_tools_enabled = resource_and_prompt_tools_enabled
        self._listing_ttl = listing_ttl_seconds
        self._failure_backoff = listing_failure_backoff_seconds
        self._connection_attempts = connection_attempts
        self._clock = clock
        self._listings: dict[str, _Listing] = {name: _Listing() for name in self._servers}
        self._background: set[asyncio.Task[None]] = set()

    @property
    def source_name(self) -> str:
        return self._source_name

    @property
    def servers(self) -> Sequence[ServerConfig]:
        return tuple(self._servers.values())

    # --- listing ----------------------------------------------------------------------

    async def list_tools(self, *, refresh: bool = False) -> Sequence[McpTool]:
        """Every server's tools, then the resource and prompt tools when enabled.

        A server that cannot be listed is left out with a warning; names that collide
        keep the first tool in server order.
        """
        await asyncio.gather(*(self._listed(name, refresh=refresh) for name in self._servers))
        offered: dict[str, McpTool] = {}
        for name, listing in self._listings.items():
            for tool in listing.tools or ():
                if tool.name in offered:
                    logger.warning(
                        "MCP tool %r of server %r is left out: its name %r is taken",
                        tool.mcp_name,
                        name,
                        tool.name,
                    )
                    continue
                offered[tool.name] = tool
        if self._resource_and_prompt_tools_enabled and self._servers:
            for definition in resource_and_prompt_tool_definitions(list(self._servers)):
                if definition.name in offered:
                    logger.warning("MCP tool %r is left out: its name is taken", definition.name)
                    continue
                offered[definition.name] = McpTool(
                    definition.name,
                    definition.description,
                    definition.parameters,
                    effect=ToolEffect.READ,
                )
        return tuple(offered.values())

    async def tool_policies(self) -> dict[str, ToolPolicy]:
        """A ``ToolPolicy`` for every classified tool; merge your own over it."""
        return {
            tool.name: ToolPolicy(tool.effect)
            for tool in await self.list_tools()
            if tool.effect is not None
        }

    async def _listed(self, name: str, *, refresh: bool) -> None:
        listing = self._listings[name]
        now = self._clock()
        if refresh or (listing.tools is None and listing.failed_at is None):
            # Shielded: a caller that times out must not cancel the listing others share.
            await asyncio.shield(self._run_listing(name))
            return
        if listing.failed_at is not None:
            if now - listing.failed_at >= self._failure_backoff:
                self._list_in_background(name)
            return
        if now - listing.listed_at >= self._listing_ttl:
            self._list_in_background(name)

    def _run_listing(self, name: str) -> asyncio.Task[None]:
        # One listing per server at a time: later callers share the running one.
        listing = self._listings[name]
        running = listing.running
        if (
            running is None
            or running.done()
            or running.get_loop() is not asyncio.get_running_loop()  # from an earlier loop
        ):
            running = asyncio.ensure_future(self._list_server(name))
            listing.running = running
        return running

    def _list_in_background(self, name: str) -> None:
        task = self._run_listing(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _list_server(self, name: str) -> None:
        server = self._servers[name]
        listing = self._listings[name]
        try:
            tools: list[McpTool] = []
            async with self._client(server) as client:
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(self._tool(server, listed) for listed in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as error:
            # Left out until a listing succeeds; stored calls still reach it by reference.
            listing.tools = None
            listing.failed_at = self._clock()
            logger.warning(
                "MCP server %r offers no tools: listing failed (%s)",
                name,
                _describe(error),
            )
            return
        listing.tools = tuple(tools)
        listing.listed_at = self._clock()
        listing.failed_at = None

    def _tool(self, server: ServerConfig, listed: Any) -> McpTool:
        effect = (
            tool_effect_from_mcp_tool_annotations(listed.annotations)
            if server.trusts_tool_annotations
            else None
        )
        execution = listed.execution
        support = getattr(execution, "task_support", None) if execution is not None else None
        return McpTool(
            mcp_tool_name(server.name, listed.name),
            listed.description or listed.title or listed.name,
            dict(listed.input_schema),
            server=server.name,
            mcp_name=listed.name,
            effect=effect,
            task_support=support or "forbidden",
        )

    # --- the ToolSource protocol ------------------------------------------------------

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        """The call with its policy (session policy, then annotations, then default)."""
        tool = listed_tool if isinstance(listed_tool, McpTool) else self._cached(listed_tool.name)
        effect = tool.effect if tool is not None else None
        reference = (
            _Reference(tool.server, tool.mcp_name, tool.task_support).encode()
            if tool is not None and tool.server
            else None
        )
        return DeferredToolCall(
            call.call_id,
            call.name,
            call.arguments,
            turn.resolve_tool_policy(call.name, effect),
            tool_source_reference=reference,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run the call from its stored reference, without a listing."""
        record = call.tool_call
        arguments = _arguments(record.arguments)
        if record.tool_name in RESOURCE_AND_PROMPT_TOOL_NAMES:
            return ToolExecutionResult(await self._resource_or_prompt(record.tool_name, arguments))
        reference = _Reference.decode(record.tool_source_reference)
        if reference is None:
            tool = await self._find(record.tool_name)
            reference = _Reference(tool.server, tool.mcp_name, tool.task_support)
        output = await self._call(
            reference,
            arguments,
            idempotency_key=call.idempotency_key,
            progress=_Progress(call.events, record.tool_call_id, record.tool_name),
            cancellation=call.cancellation,
            deadline=call.deadline,
        )
        return ToolExecutionResult(output)

    # --- for other runners and framework adapters -------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        idempotency_key: str | None,
        events: AgentEventWriter | None = None,
        cancellation: CancellationSignal | None = None,
    ) -> str:
        """Call a listed tool by its ``<server>__<tool>`` name; returns the output text.

        Pass the session's idempotency key from the adapter's tool context.
        """
        parsed = _arguments(arguments) if isinstance(arguments, str) else dict(arguments)
        if name in RESOURCE_AND_PROMPT_TOOL_NAMES and self._resource_and_prompt_tools_enabled:
            return await self._resource_or_prompt(name, parsed)
        tool = await self._find(name)
        return await self._call(
            _Reference(tool.server, tool.mcp_name, tool.task_support),
            parsed,
            idempotency_key=idempotency_key,
            progress=_Progress(events, None, name),
            cancellation=cancellation,
            deadline=None,
        )

    async def deferred_tool_handlers(
        self,
    ) -> dict[str, Callable[[DeferredToolExecution], Awaitable[ToolExecutionResult]]]:
        """A handler per listed tool, for a runner's ``execute_deferred_tool_call``."""
        return {tool.name: self.execute_deferred_tool_call for tool in await self.list_tools()}

    # --- requests ---------------------------------------------------------------------

    def _cached(self, name: str) -> McpTool | None:
        for listing in self._listings.values():
            for tool in listing.tools or ():
                if tool.name == name:
                    return tool
        return None

    async def _find(self, name: str) -> McpTool:
        tool = self._cached(name)
        if tool is None:
            await self.list_tools()
            tool = self._cached(name)
        if tool is None:
            raise ToolExecutionError(f"no configured MCP server offers a tool named {name}")
        return tool

    async def _call(
        self,
        reference: _Reference,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None,
        progress: _Progress,
        cancellation: CancellationSignal | None,
        deadline: datetime | None,
    ) -> str:
        server = self._server(reference.server)
        meta = {MCP_IDEMPOTENCY_KEY_META_KEY: idempotency_key} if idempotency_key else None
        timeout = (deadline - datetime.now(UTC)).total_seconds() if deadline is not None else None

        async def request() -> CallToolResult:
            sent = False
            try:
                async with self._client(server) as client:
                    sent = True
                    return await client.call_tool(
                        reference.tool,
                        arguments,
                        read_timeout_seconds=timeout if timeout is None else max(timeout, 1.0),
                        progress_callback=progress,
                        meta=meta,  # pyright: ignore[reportArgumentType]
                    )
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
                    f"and broke off: {_describe(error)}"
                ) from error

        result = await _abortable(request(), cancellation)
        text = _result_text(result)
        if result.is_error:
            raise ToolExecutionError(text or f"MCP tool {reference.tool} failed")
        return text

    async def _resource_or_prompt(self, tool_name: str, arguments: dict[str, Any]) -> str:
        server_name = arguments.get("server")
        if not isinstance(server_name, str) or server_name not in self._servers:
            raise ToolExecutionError(f"no MCP server named {server_name!r} is configured")
        async with self._client(self._servers[server_name]) as client:
            try:
                return await run_resource_or_prompt_tool(tool_name, arguments, client)
            except (MCPError, ValueError) as error:
                message = error.error.message if isinstance(error, MCPError) else str(error)
                raise ToolExecutionError(message) from error

    def _server(self, name: str) -> ServerConfig:
        server = self._servers.get(name)
        if server is None:
            raise ToolExecutionError(f"MCP server {name} is not configured on this Worker")
        return server

    @asynccontextmanager
    async def _client(self, server: ServerConfig) -> AsyncGenerator[Client]:
        """A connected client, after at most ``connection_attempts`` tries.

        Connecting that keeps failing raises ``ToolExecutionError``: nothing was sent.
        """
        stack = AsyncExitStack()
        errors: list[str] = []
        for _ in range(self._connection_attempts):
            stack = AsyncExitStack()
            try:
                async with asyncio.timeout(server.connection_timeout_seconds):
                    client = await stack.enter_async_context(_new_client(server, stack))
                break
            except Exception as error:
                errors.append(_describe(error))
                await _close_quietly(stack)
        else:
            raise ToolExecutionError(
                f"cannot connect to MCP server {server.name} after "
                f"{self._connection_attempts} attempts: {errors[-1]}"
            )
        try:
            yield client
        except BaseException as error:
            # Closing the SDK's task group turns the cancellation a broken transport caused
            # into the transport's own error, which then replaces ``error``; an error of the
            # body that the group merely wraps is raised as it is.
            try:
                suppressed = await stack.__aexit__(type(error), error, error.__traceback__)
            except BaseException as closing:
                if _innermost(closing) is error:
                    raise error from None
                raise
            if not suppressed:
                raise
        else:
            await _close_quietly(stack)


def _new_client(server: ServerConfig, stack: AsyncExitStack) -> Client:
    if isinstance(server, McpStdioServer):
        parameters = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
        )
        return Client(parameters, cache=None, client_info=_CLIENT_INFO)
    http = create_mcp_http_client(headers=dict(server.headers))
    stack.push_async_callback(http.aclose)
    return Client(
        streamable_http_client(server.url, http_client=http), cache=None, client_info=_CLIENT_INFO
    )


async def _close_quietly(stack: AsyncExitStack) -> None:
    # The answer is in; a connection that closes badly changes nothing about it.
    try:
        await stack.aclose()
    except Exception as error:
        logger.debug("closing an MCP connection failed: %s", error)


async def _abortable(
    request: Awaitable[CallToolResult], cancellation: CancellationSignal | None
) -> CallToolResult:
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


def _describe(error: BaseException) -> str:
    """The innermost error of an SDK task group, which says what actually broke."""
    leaf = _innermost(error)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def _innermost(error: BaseException) -> BaseException:
    # getattr, not isinstance: narrowing to BaseExceptionGroup loses the element type.
    inner: Sequence[BaseException] = getattr(error, "exceptions", ())
    return _innermost(inner[0]) if inner else error


def _arguments(text: str) -> dict[str, Any]:
    try:
        value: Any = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise ToolExecutionError(f"the tool arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("the tool arguments must be a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]


def _result_text(result: CallToolResult) -> str:
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
