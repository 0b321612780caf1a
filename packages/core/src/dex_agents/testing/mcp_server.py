"""A real MCP server for tests, written with the ``mcp`` SDK's server API.

Run it as ``python -m dex_agents.testing.mcp_server --log FILE`` (stdio) or with
``--http PORT`` (Streamable HTTP on loopback; ``--stateful`` keeps protocol sessions).
Every ``tools/call`` appends one JSON line to ``--log``: the tool, its arguments and
the idempotency key the client sent in ``_meta``, so a test sees what reached the
server and how often. Needs the ``dex-agents[mcp]`` extra.

Tools: ``lookup`` (read), ``set_value`` (idempotent), ``send_email`` (no hints: a
non-idempotent write), ``hold`` (no hints; logs its start, then waits until the file
``--release`` names exists, so a test can kill the Worker mid-call), ``count_up``
(read; reports progress), ``explode`` (read; an ``isError`` result). Also a resource
``note://readme``, a template ``note://{name}`` and a prompt ``greeting``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from dex_agents.testing.ports import find_free_loopback_ports
from dex_agents.testing.processes import ChildProcess

__all__ = [
    "HTTP_READY_LINE",
    "IDEMPOTENCY_META_KEY",
    "McpHttpTestServer",
    "build_server",
    "main",
    "read_calls",
]

IDEMPOTENCY_META_KEY = "io.superdurable.dex/idempotencyKey"


def read_calls(log: Path) -> list[dict[str, Any]]:
    """The calls the server logged, oldest first (``[]`` before the first)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def build_server(log: Path, release: Path | None = None) -> MCPServer:
    """The test server, logging every call to ``log``."""
    server = MCPServer("dex-test")

    def record(ctx: Context, tool: str, arguments: dict[str, Any]) -> None:
        meta = ctx.request_context.meta or {}
        key = meta.get(IDEMPOTENCY_META_KEY)  # pyright: ignore[reportUnknownMemberType]
        line = json.dumps({"tool": tool, "arguments": arguments, "idempotency_key": key})
        with log.open("a") as file:
            file.write(line + "\n")
            file.flush()
            os.fsync(file.fileno())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(order_id: str, ctx: Context) -> str:
        """Look up an order's status."""
        record(ctx, "lookup", {"order_id": order_id})
        return f"order {order_id}: shipped"

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True))
    def set_value(key: str, value: str, ctx: Context) -> str:
        """Set a value; setting it again changes nothing."""
        record(ctx, "set_value", {"key": key, "value": value})
        return f"{key} = {value}"

    @server.tool()
    def send_email(to: str, ctx: Context) -> str:
        """Send an email (not idempotent)."""
        record(ctx, "send_email", {"to": to})
        return f"sent to {to}"

    @server.tool(name="hold")
    async def hold(label: str, ctx: Context) -> str:
        """Start, then wait until the test releases the call."""
        record(ctx, "hold", {"label": label})
        # The release is a file another process writes, so poll for it.
        while release is None or not await asyncio.to_thread(release.exists):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        return f"held {label}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def count_up(to: int, ctx: Context) -> str:
        """Count to ``to``, reporting progress."""
        record(ctx, "count_up", {"to": to})
        for step in range(1, to + 1):
            await ctx.report_progress(step, to, f"step {step}")
        return f"counted to {to}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def explode(ctx: Context) -> str:
        """Always fail."""
        record(ctx, "explode", {})
        raise ValueError("the tool exploded")

    @server.resource("note://readme", description="The readme note.", mime_type="text/plain")
    def readme() -> str:
        return "Read me first."

    @server.resource("note://{name}", description="A note by name.")
    def note(name: str) -> str:
        return f"note {name}"

    @server.prompt(description="Greet someone.")
    def greeting(name: str) -> str:
        return f"Say hello to {name}."

    return server


HTTP_READY_LINE = "dex-agents test MCP server ready"


class McpHttpTestServer:
    """The test server over Streamable HTTP in a child process, on a loopback port."""

    def __init__(
        self, *, calls: Path, release: Path | None, stateful: bool, process_log: Path
    ) -> None:
        self.port = find_free_loopback_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._arguments = ["--log", str(calls), "--http", str(self.port)]
        if release is not None:
            self._arguments += ["--release", str(release)]
        if stateful:
            self._arguments.append("--stateful")
        self._process_log = process_log
        self._process: ChildProcess | None = None

    def start(self) -> McpHttpTestServer:
        """Start the child and return once it accepts requests."""
        self._process = ChildProcess.spawn(
            [sys.executable, "-m", "dex_agents.testing.mcp_server", *self._arguments],
            log_path=self._process_log,
        )
        self._process.wait_for_log_line(HTTP_READY_LINE, timedelta(seconds=60))
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def __enter__(self) -> McpHttpTestServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


async def _serve_http(server: MCPServer, port: int, stateful: bool) -> None:
    app = server.streamable_http_app(stateless_http=not stateful, json_response=not stateful)
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(web.serve())
    while not web.started and not serving.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    print(HTTP_READY_LINE, flush=True)
    await serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--release", type=Path)
    parser.add_argument("--http", type=int, help="serve Streamable HTTP on this loopback port")
    parser.add_argument("--stateful", action="store_true", help="keep protocol sessions (HTTP)")
    args = parser.parse_args(argv)
    server = build_server(args.log, args.release)
    if args.http is None:
        server.run("stdio")
    else:
        asyncio.run(_serve_http(server, args.http, args.stateful))


if __name__ == "__main__":
    main()
