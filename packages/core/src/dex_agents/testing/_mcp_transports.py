"""One ``McpToolSource`` over both transports, for tests that call a tool of each.

``files`` is the test server over stdio and ``tickets`` the same server over
Streamable HTTP (stateless, on a loopback port); each logs every call with the
idempotency key it received in ``_meta``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, Self

from dex_agents.mcp import McpHttpServer, McpStdioServer, McpToolSource
from dex_agents.testing._mcp_server import McpHttpTestServer, read_calls

__all__ = ["StdioAndHttpMcpServers"]

ServerName = Literal["files", "tickets"]


class StdioAndHttpMcpServers:
    """Starts the HTTP server on enter and stops it on exit; ``source`` offers both."""

    def __init__(self, directory: Path) -> None:
        self._logs: dict[ServerName, Path] = {
            "files": directory / "stdio-calls.jsonl",
            "tickets": directory / "http-calls.jsonl",
        }
        self._http = McpHttpTestServer(
            calls=self._logs["tickets"],
            release=None,
            stateful=False,
            process_log=directory / "http.log",
        )
        self.source = McpToolSource(
            [
                McpStdioServer(
                    name="files",
                    command=sys.executable,
                    args=("-m", "dex_agents.testing.mcp_server", "--log", str(self._logs["files"])),
                ),
                McpHttpServer(name="tickets", url=self._http.url),
            ],
            # A loaded test machine can take seconds to start the stdio server's Python.
            listing_timeout_seconds=60,
        )

    def calls(self, server: ServerName) -> list[tuple[str, str]]:
        """``(tool, idempotency key)`` of each call ``server`` logged, oldest first."""
        return [(call["tool"], call["idempotency_key"]) for call in read_calls(self._logs[server])]

    def __enter__(self) -> Self:
        self._http.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._http.stop()
