"""One running app (engine, Worker, HTTP server) for the whole test session, and one
with the shipped stdio MCP demo servers behind ``McpToolSource``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from app_server import RunningApp

from dex_agents.mcp import McpToolSource
from dex_agents_ai_agent.tools import SelectedServersToolSource, load_mcp_config


@pytest.fixture(scope="session")
def running_app() -> Iterator[RunningApp]:
    app = RunningApp()
    app.start()
    yield app
    app.stop()


CONFIG = Path(__file__).parents[1] / "mcp-servers.local.yaml"


@pytest.fixture(scope="session")
def mcp_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningApp]:
    # The shipped config, with this interpreter in place of `uv run python`.
    text = CONFIG.read_text(encoding="utf-8").replace(
        'command: uv\n    args: ["run", "python",',
        f"command: {json.dumps(sys.executable)}\n    args: [",
    )
    path = tmp_path_factory.mktemp("mcp") / "mcp-servers.yaml"
    path.write_text(text, encoding="utf-8")
    app = RunningApp(mcp_servers=load_mcp_config(path))
    (source,) = app.catalog.tool_sources
    assert isinstance(source, SelectedServersToolSource)
    assert isinstance(source.inner, McpToolSource)
    app.start()
    yield app
    app.stop()
