"""The demo MCP servers run over stdio and list the tools the Portal shows."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dex_agents_ai_agent.tools import DEMO_TOOLS, demo_mcp_servers, load_mcp_config

CONFIG = Path(__file__).parents[1] / "mcp-servers.local.yaml"


def server(name: str) -> StdioServerParameters:
    module = "dex_agents_ai_agent.demo_mcp_server"
    return StdioServerParameters(command=sys.executable, args=["-m", module, name])


async def test_each_demo_server_lists_and_runs_its_tools_over_stdio() -> None:
    listed: dict[str, bool] = {}
    for name in ("search", "slack", "google_docs"):
        async with Client(server(name)) as client:
            for tool in (await client.list_tools()).tools:
                hints = tool.annotations
                listed[f"{name}__{tool.name}"] = bool(hints and hints.read_only_hint)
            if name == "search":
                result = await client.call_tool("web_search", {"query": "dex"})
                assert "Demo search results for 'dex'" in str(result.content)
    in_process = {
        tool.name: tool.effect is not None and tool.effect.value == "read" for _, tool in DEMO_TOOLS
    }
    assert listed == in_process


def test_the_local_config_names_the_three_servers() -> None:
    servers = load_mcp_config(CONFIG)
    assert [s.name for s in servers] == ["search", "slack", "google_docs"]
    assert all(s.transport == "stdio" and s.trust_read_only_annotations for s in servers)
    # The file writes out the servers the command runs by default.
    defaults = demo_mcp_servers()
    assert [s.name for s in defaults] == [s.name for s in servers]
    assert [s.args for s in defaults] == [s.args[-3:] for s in servers]
