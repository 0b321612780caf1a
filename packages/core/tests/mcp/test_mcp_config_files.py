"""``load_mcp_server_configs`` reads YAML as well as JSON, with the README's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.mcp import McpHttpServer, McpStdioServer, load_mcp_server_configs

YAML = """
servers:
  - transport: stdio
    name: files
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/reports"]
    env: {NODE_OPTIONS: "--max-old-space-size=256"}
  - transport: streamable_http
    name: tickets
    url: https://tickets.example.com/mcp
    headers: {Authorization: "Bearer <token>"}
    trusts_tool_annotations: false
    destructive_tools_require_approval: true
    connection_timeout_seconds: 10
"""


def test_the_readmes_yaml_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(YAML)
    files, tickets = load_mcp_server_configs(path)
    assert isinstance(files, McpStdioServer)
    assert files.args[-1] == "/srv/reports"
    assert files.env == {"NODE_OPTIONS": "--max-old-space-size=256"}
    assert isinstance(tickets, McpHttpServer)
    assert not tickets.trusts_tool_annotations
    assert tickets.destructive_tools_require_approval
    assert tickets.connection_timeout_seconds == 10


def test_a_bad_yaml_file_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yml"
    path.write_text("servers: [\n")
    with pytest.raises(ValueError, match="cannot read MCP server configuration"):
        load_mcp_server_configs(path)
    path.write_text("servers:\n  - {transport: stdio, name: a, command: x, colour: red}\n")
    with pytest.raises(ValueError, match="invalid MCP server configuration"):
        load_mcp_server_configs(path)
