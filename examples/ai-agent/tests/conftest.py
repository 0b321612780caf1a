"""One running app (engine, Worker, HTTP server) for the whole test session, and one
with the stdio MCP demo servers (the command's default) behind ``McpToolSource``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from app_server import RunningApp

from dex_agents.mcp import McpToolSource
from dex_agents_ai_agent.tools import SelectedServersToolSource, demo_mcp_servers


@pytest.fixture(scope="session")
def running_app() -> Iterator[RunningApp]:
    app = RunningApp()
    app.start()
    yield app
    app.stop()


@pytest.fixture(scope="session")
def mcp_app() -> Iterator[RunningApp]:
    # The servers `dex-agents-ai-agent` runs by default.
    app = RunningApp(mcp_servers=demo_mcp_servers())
    (source,) = app.catalog.tool_sources
    assert isinstance(source, SelectedServersToolSource)
    assert isinstance(source.inner, McpToolSource)
    app.start()
    app.wait_until_tools_listed()
    yield app
    app.stop()
