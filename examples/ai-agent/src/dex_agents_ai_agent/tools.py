"""The tools a session can enable: the trusted MCP servers of the server's config file,
and the credential-free demo servers (search, slack, google_docs).

The configured servers become one ``dex_agents.mcp.McpToolSource``
(``build_mcp_tool_sources``): each call of one of its tools runs in its own tool
Step. With no config file the app runs the demo servers over stdio
(``demo_mcp_servers``); they can also run in-process as Stepwise function tools
with the same public names (``<server>__<tool>``) and effects, with no child
processes (the tests' default).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from dex_agents import ToolEffect
from dex_agents.models import ModelToolCall, ModelToolDefinition
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)

# The ban names the module dex_agents.stepwise.function_tool; this is the public function.
from dex_agents.stepwise import FunctionTool, ToolSource, function_tool  # noqa: TID251
from dex_agents_ai_agent.demo_tools import DEMO_SERVER_FUNCTIONS

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

BUILT_IN_TOOLS = ("write_todos", "ask_user", "durable_wait")
MCP_CONFIG_VARIABLE = "DEX_AGENT_MCP_CONFIG"


@dataclass(frozen=True)
class CatalogTool:
    """A tool as the Portal lists it."""

    name: str
    description: str
    requires_approval: bool
    server: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "requiresApproval": self.requires_approval,
            "server": self.server,
        }


@dataclass(frozen=True)
class McpServerConfig:
    """One trusted server of the config file. ``env`` and ``headers`` map a child
    variable or header to the *name* of a server environment variable, so no secret
    is ever written in the file, the session state or a response."""

    name: str
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    trust_read_only_annotations: bool = False
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: dict[str, Any]())


class McpConfigError(ValueError):
    """The MCP config file is invalid; the message names the entry."""


def load_mcp_config(path: str | os.PathLike[str] | None) -> tuple[McpServerConfig, ...]:
    """The servers of a YAML file with a top-level ``servers:`` list; none for no path."""
    if path is None:
        return ()
    data: Any = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    listed: Any = (
        cast("dict[str, Any]", data).get("servers", []) if isinstance(data, dict) else None
    )
    if not isinstance(listed, list):
        raise McpConfigError(f"{path}: expected a mapping with a 'servers' list")
    servers: list[McpServerConfig] = []
    for index, raw in enumerate(cast("list[Any]", listed)):
        if not isinstance(raw, dict):
            raise McpConfigError(f"{path}: servers[{index}] must be a mapping")
        entry = cast("dict[str, Any]", raw)
        name = entry.get("name")
        transport = entry.get("transport")
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(f"{path}: servers[{index}].name must be a non-blank string")
        if transport not in ("stdio", "streamable_http"):
            raise McpConfigError(
                f"{path}: server {name}: transport must be stdio or streamable_http"
            )
        if any(server.name == name for server in servers):
            raise McpConfigError(f"{path}: two servers are named {name}")
        servers.append(
            McpServerConfig(
                name=name,
                transport=transport,
                command=entry.get("command"),
                args=tuple(str(arg) for arg in entry.get("args", ())),
                cwd=entry.get("cwd"),
                env=dict(entry.get("env", {})),
                url=entry.get("url"),
                headers=dict(entry.get("headers", {})),
                trust_read_only_annotations=bool(entry.get("trust_read_only_annotations", False)),
                tools=dict(entry.get("tools", {})),
            )
        )
    return tuple(servers)


def build_mcp_tool_sources(
    servers: Sequence[McpServerConfig], environ: Mapping[str, str] | None = None
) -> list[ToolSource]:
    """One ``McpToolSource`` over the config file's servers (none without servers).

    The children's variables and the HTTP headers are read here, on the Worker, from
    the server environment variables the file names; a missing one is an error that
    names it.
    """
    if not servers:
        return []
    from dex_agents.mcp import McpHttpServer, McpStdioServer, McpToolSource

    values = os.environ if environ is None else environ

    def resolved(names: Mapping[str, str], server: str) -> dict[str, str]:
        missing = [name for name in names.values() if name not in values]
        if missing:
            raise McpConfigError(f"MCP server {server} needs {', '.join(missing)} to be set")
        return {key: values[name] for key, name in names.items()}

    configs: list[McpStdioServer | McpHttpServer] = []
    for server in servers:
        if server.transport == "stdio":
            if not server.command:
                raise McpConfigError(f"MCP server {server.name}: stdio needs a command")
            configs.append(
                McpStdioServer(
                    name=server.name,
                    command=server.command,
                    args=server.args,
                    env=resolved(server.env, server.name) or None,
                    cwd=server.cwd,
                    trusts_tool_annotations=server.trust_read_only_annotations,
                )
            )
        else:
            if not server.url:
                raise McpConfigError(f"MCP server {server.name}: streamable_http needs a url")
            configs.append(
                McpHttpServer(
                    name=server.name,
                    url=server.url,
                    headers=resolved(server.headers, server.name),
                    trusts_tool_annotations=server.trust_read_only_annotations,
                )
            )
    # The resource and prompt (broker) tools are on; each session may ask only its servers.
    return [
        SelectedServersToolSource(McpToolSource(configs, resource_and_prompt_tools_enabled=True))
    ]


class SelectedServersToolSource:
    """An MCP source as one session sees it: a resource or prompt tool may only ask a
    server the session selected (one of its enabled tools' servers); another server
    gets a failed result."""

    def __init__(self, inner: McpToolSource) -> None:
        self.inner = inner

    @property
    def source_name(self) -> str:
        return self.inner.source_name

    async def list_tools(self) -> Sequence[ModelToolDefinition]:
        return await self.inner.list_tools()

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        deferred = self.inner.deferred_tool_call(turn, call, listed_tool)
        from dex_agents.mcp import RESOURCE_AND_PROMPT_TOOL_NAMES

        if deferred.tool_name not in RESOURCE_AND_PROMPT_TOOL_NAMES:
            return deferred
        server = _server_argument(deferred.arguments)
        enabled: list[Any] = turn.session_settings.get("enabled_tools") or []
        selected = {str(name).partition("__")[0] for name in enabled}
        if server in selected:
            return deferred
        # Marked here, where the session's settings are known; refused in the tool Step.
        return dataclasses.replace(deferred, tool_source_reference=f"{OUTSIDE_SELECTION}{server}")

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        reference = call.tool_call.tool_source_reference or ""
        if reference.startswith(OUTSIDE_SELECTION):
            server = reference.removeprefix(OUTSIDE_SELECTION)
            raise ToolExecutionError(f"MCP server {server!r} is not selected for this Agent")
        return await self.inner.execute_deferred_tool_call(call)

    # An HTTP server's MCP task is polled by the source that started it.
    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return await self.inner.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        await self.inner.cancel_tool_task(cancellation)


OUTSIDE_SELECTION = "outside-selection:"


def _server_argument(arguments: str) -> str:
    try:
        value: Any = json.loads(arguments)
    except ValueError:
        return ""
    server = cast("dict[str, Any]", value).get("server") if isinstance(value, dict) else None
    return server if isinstance(server, str) else ""


# --- the credential-free demo servers, as in-process function tools -------------------


DEMO_TOOLS: tuple[tuple[str, FunctionTool], ...] = tuple(
    (
        server,
        function_tool(
            function,
            name=f"{server}__{function.__name__.lstrip('_')}",
            description=description,
            effect=ToolEffect.READ if read_only else ToolEffect.NON_IDEMPOTENT_WRITE,
        ),
    )
    for server, functions in DEMO_SERVER_FUNCTIONS.items()
    for function, description, read_only in functions
)


DEMO_MCP_SERVER_MODULE = "dex_agents_ai_agent.demo_mcp_server"


def demo_mcp_servers(python: str = sys.executable) -> tuple[McpServerConfig, ...]:
    """The three demo servers as stdio MCP servers run by ``python`` (this interpreter
    by default, so they start from any directory without a second ``uv run``)."""
    return tuple(
        McpServerConfig(
            name=name,
            transport="stdio",
            command=python,
            args=("-m", DEMO_MCP_SERVER_MODULE, name),
            trust_read_only_annotations=True,
        )
        for name in DEMO_SERVER_FUNCTIONS
    )


@dataclass(frozen=True)
class ToolCatalog:
    """Every server and tool a session may enable, as the Portal shows them."""

    servers: tuple[str, ...]
    tools: tuple[CatalogTool, ...]
    function_tools: tuple[FunctionTool, ...]
    tool_sources: tuple[ToolSource, ...]

    @staticmethod
    def build(servers: Sequence[McpServerConfig], *, demo_servers: bool) -> ToolCatalog:
        demo = DEMO_TOOLS if demo_servers else ()
        tools = [
            CatalogTool(tool.name, tool.description, _needs_approval(tool), server)
            for server, tool in demo
        ]
        names = {server for server, _ in demo} | {server.name for server in servers}
        return ToolCatalog(
            servers=tuple(sorted(names)),
            tools=tuple(sorted(tools, key=lambda tool: tool.name)),
            function_tools=tuple(tool for _, tool in demo),
            tool_sources=tuple(build_mcp_tool_sources(servers)),
        )

    async def with_source_tools(self) -> ToolCatalog:
        """This catalog with the MCP sources' tools listed (a server that cannot be
        listed offers none, with a warning), for the Portal and the start check."""
        listed: list[CatalogTool] = []
        for source in self.tool_sources:
            if isinstance(source, SelectedServersToolSource):
                listed.extend(
                    CatalogTool(
                        tool.name,
                        tool.description,
                        _effect_needs_approval(tool.effect or ToolEffect.UNCLASSIFIED),
                        tool.server or None,
                    )
                    for tool in await source.inner.list_tools()
                )
        known = {tool.name for tool in self.tools}
        tools = [*self.tools, *(tool for tool in listed if tool.name not in known)]
        return dataclasses.replace(self, tools=tuple(sorted(tools, key=lambda tool: tool.name)))

    def tool_names_of(self, servers: Sequence[str]) -> set[str]:
        return {tool.name for tool in self.tools if tool.server is None or tool.server in servers}


def _needs_approval(tool: FunctionTool) -> bool:
    if tool.requires_approval is not None:
        return tool.requires_approval
    return _effect_needs_approval(tool.effect)


def _effect_needs_approval(effect: ToolEffect | None) -> bool:
    return effect in (ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.UNCLASSIFIED)
