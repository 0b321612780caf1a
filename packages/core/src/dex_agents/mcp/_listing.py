"""Listing the tools of MCP servers: one cached listing per server and Worker process.

Each server is listed on its own. The first listing of a server is awaited for at most
the listing deadline; a server that has not answered by then is left out of this
listing with a warning and goes on listing in the background, so the next listing
offers it once it answered, without waiting again. After the TTL a server is listed
again in the background while its earlier tools are offered. A server that cannot be
listed is left out with a warning naming its error, and tried again in the background
after the failure backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dex_agents._adapter_support import tool_declaration_metadata
from dex_agents.mcp._config import McpHttpServer, McpStdioServer
from dex_agents.mcp._connections import Connections, PooledSession, describe
from dex_agents.mcp._naming import mcp_tool_name, tool_effect_from_mcp_tool_annotations
from dex_agents.mcp._resource_tools import resource_and_prompt_tool_definitions
from dex_agents.models import ModelToolDefinition
from dex_agents.values import ToolEffect

__all__ = ["Listings", "McpTool", "TaskSupport"]

logger = logging.getLogger("dex_agents.mcp")

ServerConfig = McpStdioServer | McpHttpServer
TaskSupport = Literal["forbidden", "optional", "required"]


@dataclass(frozen=True)
class McpTool(ModelToolDefinition):
    """A listed MCP tool: the offered definition plus where and how to call it."""

    server: str = ""
    """The configured server that lists it."""
    mcp_name: str = ""
    """The tool's own name on that server."""
    effect: ToolEffect | None = None
    """From the annotations of a trusted server; ``None`` leaves the default effect."""
    task_support: TaskSupport = "forbidden"
    """The tool's ``execution.taskSupport``."""
    requires_approval: bool | None = None
    """``True`` for a destructive tool of a server with
    ``destructive_tools_require_approval``; ``None`` follows the effect."""

    def declaration_metadata(self) -> dict[str, Any] | None:
        """Framework tool metadata that declares the effect and approval (the adapters'
        ``dex_tool_metadata``), or ``None`` when the annotations give no effect."""
        if self.effect is None:
            return None
        return tool_declaration_metadata(self.effect, requires_approval=self.requires_approval)


@dataclass
class _Listing:
    """The cached listing of one server."""

    tools: tuple[McpTool, ...] | None = None
    listed_at: float = 0.0
    failed_at: float | None = None
    running: asyncio.Task[None] | None = None
    overdue: bool = False
    """The running listing outlived a caller's deadline: later callers do not wait for it."""


class Listings:
    """The listings of every configured server, cached in this Worker process."""

    def __init__(
        self,
        servers: dict[str, ServerConfig],
        connections: Connections,
        *,
        resource_and_prompt_tools_enabled: bool,
        ttl_seconds: float,
        failure_backoff_seconds: float,
        deadline_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._servers = servers
        self._connections = connections
        self._resource_and_prompt_tools_enabled = resource_and_prompt_tools_enabled
        self._ttl = ttl_seconds
        self._failure_backoff = failure_backoff_seconds
        self._deadline = deadline_seconds
        self._clock = clock
        self._listings: dict[str, _Listing] = {name: _Listing() for name in servers}
        self._background: set[asyncio.Task[None]] = set()

    async def list_tools(self, *, refresh: bool = False) -> Sequence[McpTool]:
        """Every server's tools, then the resource and prompt tools when enabled.

        A server that cannot be listed, or has not listed within the deadline, is left
        out with a warning; names that collide keep the first tool in server order.
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

    def cached(self, name: str) -> McpTool | None:
        """The listed tool named ``name``, without I/O."""
        for listing in self._listings.values():
            for tool in listing.tools or ():
                if tool.name == name:
                    return tool
        return None

    async def find(self, name: str) -> McpTool | None:
        """The listed tool named ``name``, listing the servers when it is not cached.

        A call by name waits for the listings still running to end, past the deadline:
        the deadline keeps a model call from waiting, not a call of a known tool.
        """
        tool = self.cached(name)
        if tool is None:
            await self.list_tools()
            tool = self.cached(name)
        if tool is None:
            loop = asyncio.get_running_loop()
            running = [
                listing.running
                for listing in self._listings.values()
                if listing.running is not None
                and not listing.running.done()
                and listing.running.get_loop() is loop
            ]
            await asyncio.gather(*(asyncio.shield(task) for task in running))
            tool = self.cached(name)
        return tool

    async def _listed(self, name: str, *, refresh: bool) -> None:
        listing = self._listings[name]
        now = self._clock()
        if refresh or (listing.tools is None and listing.failed_at is None):
            running = self._run_listing(name)
            if listing.overdue and not refresh:
                return  # still listing in the background; offered once it answered
            self._keep(running)
            try:
                # Shielded: a caller that stops waiting must not cancel the shared listing.
                async with asyncio.timeout(self._deadline):
                    await asyncio.shield(running)
            except TimeoutError:
                if running.done():
                    raise
                listing.overdue = True
                logger.warning(
                    "MCP server %r offers no tools in this listing: it did not list within "
                    "%gs (listing goes on in the background)",
                    name,
                    self._deadline,
                )
            return
        if listing.failed_at is not None:
            if now - listing.failed_at >= self._failure_backoff:
                self._list_in_background(name)
            return
        if now - listing.listed_at >= self._ttl:
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
        self._keep(self._run_listing(name))

    def _keep(self, task: asyncio.Task[None]) -> None:
        # A listing outlives the callers that stopped waiting for it.
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Stop the listings still running in this loop."""
        loop = asyncio.get_running_loop()
        running = [task for task in self._background if task.get_loop() is loop]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _list_server(self, name: str) -> None:
        server = self._servers[name]
        listing = self._listings[name]

        async def every_page(pooled: PooledSession) -> list[McpTool]:
            tools: list[McpTool] = []
            cursor: str | None = None
            while True:
                # A server that connected but never answers still ends this listing.
                async with asyncio.timeout(server.connection_timeout_seconds):
                    page = await pooled.client.list_tools(cursor=cursor)
                tools.extend(_tool(server, listed) for listed in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

        try:
            tools = await self._connections.run(server, every_page)
        except Exception as error:
            # Left out until a listing succeeds; stored calls still reach it by reference.
            listing.tools = None
            listing.failed_at = self._clock()
            listing.overdue = False
            logger.warning(
                "MCP server %r offers no tools: listing failed (%s); tried again in the "
                "background after %gs",
                name,
                describe(error),
                self._failure_backoff,
            )
            return
        listing.tools = tuple(tools)
        listing.listed_at = self._clock()
        listing.failed_at = None
        listing.overdue = False


def _tool(server: ServerConfig, listed: Any) -> McpTool:
    effect = (
        tool_effect_from_mcp_tool_annotations(listed.annotations)
        if server.trusts_tool_annotations
        else None
    )
    execution = listed.execution
    support = getattr(execution, "task_support", None) if execution is not None else None
    annotations = listed.annotations
    # destructiveHint defaults to true in MCP: only an explicit false is not destructive.
    destructive = annotations is not None and annotations.destructive_hint is not False
    requires_approval = (
        True
        if server.destructive_tools_require_approval
        and effect is ToolEffect.IDEMPOTENT_WRITE
        and destructive
        else None
    )
    return McpTool(
        mcp_tool_name(server.name, listed.name),
        listed.description or listed.title or listed.name,
        dict(listed.input_schema),
        server=server.name,
        mcp_name=listed.name,
        effect=effect,
        task_support=support or "forbidden",
        requires_approval=requires_approval,
    )
