"""Real MCP servers for the tests: the stdio one as a child per request, HTTP on loopback."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dex_agents.mcp import McpHttpServer, McpStdioServer
from dex_agents.testing.mcp_reference import EverythingHttpServer, ReferenceServers
from dex_agents.testing.mcp_server import McpHttpTestServer

FLOWS = Path(__file__).resolve().parent.parent / "worker_flows"


@pytest.fixture(scope="module")
def mcp_agent() -> Iterator[Any]:
    """``worker_flows/mcp_agent.py``: a Stepwise agent on the test servers."""
    sys.path.insert(0, str(FLOWS))
    try:
        import mcp_agent  # pyright: ignore[reportMissingImports]

        yield mcp_agent
    finally:
        sys.path.remove(str(FLOWS))


@pytest.fixture(scope="module")
def mcp_reference_agent() -> Iterator[Any]:
    """``worker_flows/mcp_reference_agent.py``: a Stepwise agent on server-everything."""
    sys.path.insert(0, str(FLOWS))
    try:
        import mcp_reference_agent  # pyright: ignore[reportMissingImports]

        yield mcp_reference_agent
    finally:
        sys.path.remove(str(FLOWS))


@pytest.fixture
def worker_environment(
    mcp_agent: Any, calls: Path, release: Path, http_process: McpHttpTestServer
) -> dict[str, str]:
    """The environment a Worker child needs to build the MCP agent's Flow."""
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH")])),
        mcp_agent.CALLS_VARIABLE: str(calls),
        mcp_agent.RELEASE_VARIABLE: str(release),
        mcp_agent.URL_VARIABLE: http_process.url,
    }


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


@pytest.fixture(scope="session")
def reference() -> ReferenceServers:
    """The npm reference servers, installed once from the pinned lock (skips without npm)."""
    servers, reason = ReferenceServers.install()
    if servers is None:
        pytest.skip(reason)
    return servers


@pytest.fixture
def everything_http(reference: ReferenceServers, tmp_path: Path) -> Iterator[EverythingHttpServer]:
    """server-everything over Streamable HTTP, in a child process."""
    with reference.everything_http(tmp_path / "everything-http.log") as server:
        yield server
