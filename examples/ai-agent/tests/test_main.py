"""``dex-agents-ai-agent``: by default it offers the demo servers over stdio MCP, and the
command itself serves a Portal that lists their tools, from any directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dex_agents.testing import find_free_loopback_ports
from dex_agents_ai_agent.main import build_catalog, parse_arguments
from dex_agents_ai_agent.tools import SelectedServersToolSource

CONFIG = Path(__file__).parents[1] / "mcp-servers.local.yaml"
DEMO_SERVERS = ("google_docs", "search", "slack")


def test_the_default_offers_the_demo_servers_over_stdio_mcp() -> None:
    catalog = build_catalog(parse_arguments([]))
    assert catalog.servers == DEMO_SERVERS
    assert catalog.function_tools == ()  # no in-process copies
    (source,) = catalog.tool_sources
    assert isinstance(source, SelectedServersToolSource)
    assert sorted(server.name for server in source.inner.servers) == list(DEMO_SERVERS)


@pytest.mark.parametrize(
    ("arguments", "servers", "in_process", "sources"),
    [
        (["--in-process-demo"], DEMO_SERVERS, 5, 0),
        (["--no-demo-servers"], (), 0, 0),
        (["--mcp-config", str(CONFIG)], DEMO_SERVERS, 0, 1),
    ],
)
def test_flags_choose_other_tools(
    arguments: list[str], servers: tuple[str, ...], in_process: int, sources: int
) -> None:
    catalog = build_catalog(parse_arguments(arguments))
    assert catalog.servers == servers
    assert len(catalog.function_tools) == in_process
    assert len(catalog.tool_sources) == sources


def test_the_two_demo_flags_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--no-demo-servers", "--in-process-demo"])


def test_the_command_serves_the_demo_mcp_tools(tmp_path: Path) -> None:
    (port,) = find_free_loopback_ports(1)
    command = [sys.executable, "-m", "dex_agents_ai_agent.main", "--port", str(port)]
    # A fresh directory: nothing may depend on the repository's working directory.
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:
            if line.startswith("AI Agent: "):
                url = line.removeprefix("AI Agent: ").strip()
                break
        assert url == f"http://127.0.0.1:{port}/products/ai-agent/"
        portal = _wait_for_portal(url, process)
        assert portal["mcpServers"] == list(DEMO_SERVERS)
        tools = {tool["name"]: tool for tool in portal["tools"]}
        # Only the MCP source lists the broker tools: the tools came over stdio.
        assert "mcp_list_resources_and_prompts" in tools
        assert tools["slack__post_message"]["requiresApproval"] is True
        assert tools["search__web_search"]["requiresApproval"] is False
        assert (tmp_path / "ai-agent.sqlite3").is_file()
    finally:
        process.terminate()
        process.wait(60)


def _wait_for_portal(url: str, process: subprocess.Popen[str]) -> dict[str, Any]:
    # The URL is printed before the server listens; it answers while the servers' tools
    # are still being listed (``toolsPending``), and lists them once they are.
    with httpx.Client(timeout=30) as client:
        while process.poll() is None:
            try:
                response = client.get(f"{url}portal")
            except httpx.ConnectError:
                time.sleep(0.1)  # polling the port until it listens
                continue
            response.raise_for_status()
            portal = response.json()
            if not portal["toolsPending"]:
                return portal
            time.sleep(0.2)  # polling until the tools are listed
    raise AssertionError(f"the command exited with {process.returncode}")
