"""Connections to MCP servers: a connected ``mcp.Client`` per request.

Every request opens a new connection (handshake within the server's connection
timeout) and closes it afterwards, so no protocol session outlives a request and a
server restart between listing and calling is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import httpx2
from mcp import Client
from mcp.client import Transport
from mcp.client.extension import ClientExtension
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from dex_agents.mcp._config import McpHttpServer, McpStdioServer
from dex_agents.mcp._tasks import LegacyTaskInput, TaskChannel
from dex_agents.runner import ToolExecutionError

__all__ = ["Connections", "ServerConfig", "describe", "innermost"]

logger = logging.getLogger("dex_agents.mcp")

CLIENT_INFO = Implementation(name="dex-agents", version="0.2.0")

ServerConfig = McpStdioServer | McpHttpServer


class Connections:
    """Opens connections to the configured servers, each after at most ``attempts`` tries."""

    def __init__(self, *, attempts: int) -> None:
        self.attempts = attempts

    @asynccontextmanager
    async def client(
        self,
        server: ServerConfig,
        *extensions: ClientExtension,
        channel: TaskChannel | None = None,
        elicitation: LegacyTaskInput | None = None,
    ) -> AsyncGenerator[Client]:
        """A connected client, after at most ``attempts`` tries.

        Connecting that keeps failing raises ``ToolExecutionError``: nothing was sent.
        """
        stack = AsyncExitStack()
        errors: list[str] = []
        for _ in range(self.attempts):
            stack = AsyncExitStack()
            try:
                async with asyncio.timeout(server.connection_timeout_seconds):
                    client = await stack.enter_async_context(
                        _new_client(server, stack, extensions, channel, elicitation)
                    )
                break
            except Exception as error:
                errors.append(describe(error))
                await close_quietly(stack)
        else:
            raise ToolExecutionError(
                f"cannot connect to MCP server {server.name} after "
                f"{self.attempts} attempts: {errors[-1]}"
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
                if innermost(closing) is error:
                    raise error from None
                raise
            if not suppressed:
                raise
        else:
            await close_quietly(stack)


def _new_client(
    server: ServerConfig,
    stack: AsyncExitStack,
    extensions: Sequence[ClientExtension],
    channel: TaskChannel | None,
    elicitation: LegacyTaskInput | None,
) -> Client:
    transport: StdioServerParameters | Transport
    if isinstance(server, McpStdioServer):
        transport = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
        )
        if channel is not None:
            transport = channel.wrap(stdio_client(transport))
    else:
        http = _http_client(server)
        stack.push_async_callback(http.aclose)
        transport = streamable_http_client(server.url, http_client=http)
        if channel is not None:
            transport = channel.wrap(transport)
    return Client(
        transport,
        cache=None,
        client_info=CLIENT_INFO,
        extensions=list(extensions) or None,
        elicitation_callback=elicitation,
    )


async def close_quietly(stack: AsyncExitStack) -> None:
    # The answer is in; a connection that closes badly changes nothing about it.
    try:
        await stack.aclose()
    except Exception as error:
        logger.debug("closing an MCP connection failed: %s", error)


def describe(error: BaseException) -> str:
    """The innermost error of an SDK task group, which says what actually broke."""
    leaf = innermost(error)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def innermost(error: BaseException) -> BaseException:
    # getattr, not isinstance: narrowing to BaseExceptionGroup loses the element type.
    inner: Sequence[BaseException] = getattr(error, "exceptions", ())
    return innermost(inner[0]) if inner else error


# The MCP transports' own defaults: 30 s to connect, write and wait for a pooled
# connection, 5 min to read, since a server may hold a response stream open.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _http_client(server: McpHttpServer) -> httpx2.AsyncClient:
    """An HTTP client for one connection to ``server``, with its configured headers."""
    return httpx2.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT)
