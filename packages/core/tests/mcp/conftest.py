"""Real MCP servers for the tests: the stdio one as a child per request, HTTP on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.mcp import McpHttpServer, McpStdioServer
from dex_agents.testing.mcp_server import McpHttpTestServer


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    """The file every test server logs its calls to."""
    return tmp_path / "calls.jsonl"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """Once this file exists, the ``hold`` tool returns."""
    return tmp_path / "release"


@pytest.fixture
def stdio_server(calls: Path, release: Path) -> McpStdioServer:
    return McpStdioServer(
        name="files",
        command=sys.executable,
        args=(
            "-m",
            "dex_agents.testing.mcp_server",
            "--log",
            str(calls),
            "--release",
            str(release),
        ),
    )


@pytest.fixture
def http_process(calls: Path, release: Path, tmp_path: Path) -> Iterator[McpHttpTestServer]:
    """The stateless Streamable HTTP server."""
    with McpHttpTestServer(
        calls=calls, release=release, stateful=False, process_log=tmp_path / "http.log"
    ) as process:
        yield process


@pytest.fixture
def http_server(http_process: McpHttpTestServer) -> McpHttpServer:
    return McpHttpServer(name="tickets", url=http_process.url, headers={"X-Test": "yes"})
