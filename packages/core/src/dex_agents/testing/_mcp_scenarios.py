"""The MCP tools of the conformance suite's MCP scenarios, for a scenario factory.

A scenario with ``ScenarioSession.mcp_server_url`` runs the MCP test server
(``McpHttpTestServer``, stateless Streamable HTTP, tasks in one store) and asks the
factory to offer three of its tools through the adapter's MCP wrapping: ``approve_report``
(a task that asks for input), ``build_report`` (a task that runs until released) and
``lookup`` (a plain read). ``scenario_mcp_tools`` gives the source and the tools'
definitions without listing, so a factory stays synchronous; the tool Step lists the
server on the Worker when it calls. Only a session that asks for MCP imports
``dex_agents.mcp`` (the ``mcp`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dex_agents._contract import SupportsToolTasks
from dex_agents._tool_task_routing import ToolTasksOption
from dex_agents._values import ToolEffect
from dex_agents.testing._scenario_tasks import ScenarioTaskPoller
from dex_agents.testing._scripts import ScenarioSession, ScenarioTool

if TYPE_CHECKING:
    from dex_agents.mcp import McpTool, McpToolSource

__all__ = [
    "SCENARIO_MCP_SERVER",
    "ScenarioMcpTools",
    "scenario_mcp_tools",
    "with_scenario_mcp_tools",
]

_ToolT = TypeVar("_ToolT")

SCENARIO_MCP_SERVER = "tickets"
"""The configured name of the scenarios' MCP server: its tools are ``tickets__<tool>``."""


def _label_tool(name: str, description: str) -> McpTool:
    from dex_agents.mcp import McpTool

    return McpTool(
        name=f"{SCENARIO_MCP_SERVER}__{name}",
        description=description,
        parameters={
            "type": "object",
            "properties": {"label": {"type": "string"}},
            "required": ["label"],
        },
        server=SCENARIO_MCP_SERVER,
        mcp_name=name,
        effect=ToolEffect.IDEMPOTENT_WRITE,
    )


def _tools() -> tuple[McpTool, ...]:
    from dex_agents.mcp import McpTool

    lookup = McpTool(
        name=f"{SCENARIO_MCP_SERVER}__lookup",
        description="Look up an order's status.",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
        server=SCENARIO_MCP_SERVER,
        mcp_name="lookup",
        effect=ToolEffect.READ,
    )
    return (
        _label_tool("approve_report", "Ask for approval of a report, as a task."),
        _label_tool("build_report", "Build a report; a long task, so call it as one."),
        lookup,
    )


@dataclass(frozen=True)
class ScenarioMcpTools:
    """The scenario's MCP source and the definitions of the tools it offers."""

    source: McpToolSource
    tools: tuple[McpTool, ...]

    def tool_tasks(
        self, poller: SupportsToolTasks, scenario_tools: Sequence[ScenarioTool]
    ) -> dict[str, SupportsToolTasks]:
        """An adapter's ``tool_tasks=``: ``poller`` for the scenario tools, the source for
        the MCP tools, so a task the source handed over is polled and cancelled by it."""
        return {
            **{tool.name: poller for tool in scenario_tools},
            **{tool.name: self.source for tool in self.tools},
        }


def scenario_mcp_tools(session: ScenarioSession) -> ScenarioMcpTools | None:
    """The MCP tools ``session`` asks for, or ``None`` without ``mcp_server_url``."""
    if session.mcp_server_url is None:
        return None
    from dex_agents.mcp import McpHttpServer, McpToolSource

    source = McpToolSource(
        [McpHttpServer(name=SCENARIO_MCP_SERVER, url=session.mcp_server_url)],
        # A loaded test machine can take a while to answer the first listing.
        listing_timeout_seconds=60,
    )
    return ScenarioMcpTools(source, _tools())


def with_scenario_mcp_tools(
    session: ScenarioSession,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    framework_tools: Sequence[_ToolT],
    wrap_mcp_tools: Callable[[McpToolSource, tuple[McpTool, ...]], Sequence[_ToolT]],
) -> tuple[list[_ToolT], ToolTasksOption]:
    """A factory's framework tools and its ``tool_tasks=``, with the MCP tools ``session``
    asks for: ``framework_tools`` (the scenario tools, built by the factory) plus
    ``wrap_mcp_tools(source, tools)`` (the adapter's ``mcp_source_tools``), polled by a
    ``ScenarioTaskPoller`` and the MCP source."""
    poller = ScenarioTaskPoller(tools, Path(state_directory))
    mcp = scenario_mcp_tools(session)
    if mcp is None:
        return list(framework_tools), poller
    wrapped = [*framework_tools, *wrap_mcp_tools(mcp.source, mcp.tools)]
    return wrapped, mcp.tool_tasks(poller, tools)
