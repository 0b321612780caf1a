"""HTTP liveness and readiness probes for an orchestrator: ``GET /livez`` and ``/readyz``.

A few lines of asyncio, no web framework: each request is one ``GET`` line and its
headers, answered ``200`` with ``ok`` or ``503`` with the reason, then the connection
closes. ``dex-local-engine serve --health-port`` serves the engine's, and
``dex_agents.AgentHost(health=...)`` a Worker's or a web process's. A probe answers on
the process's own event loop, so a loop blocked for good stops answering ``/livez``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

__all__ = ["ProbeCheck", "ProbeServer"]

_LOG = logging.getLogger("dex_local_engine.probes")

ProbeCheck = Callable[[], str | None]
"""A probe's check: ``None`` when it passes, else the reason it does not."""

_REQUEST_TIMEOUT_SECONDS = 5.0
_MAX_REQUEST_BYTES = 8192


class ProbeServer:
    """Serves ``GET /livez`` (``live``) and ``GET /readyz`` (``ready``) on ``host:port``.

    Each check returns ``None`` (answer ``200 ok``) or the reason it fails (answer
    ``503`` with the reason). Any other path is ``404``, any other method ``405``.
    ``port=0`` picks a free port; ``start()`` returns the ``host:port`` it listens on.
    """

    def __init__(self, host: str, port: int, *, live: ProbeCheck, ready: ProbeCheck) -> None:
        if not isinstance(host, str) or not host:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"the probe host must be a non-empty str, not {host!r}")
        if type(port) is not int or not 0 <= port <= 65535:
            raise ValueError(f"the probe port must be an int in 0-65535, not {port!r}")
        self.host = host
        self.port = port
        self._checks = {"/livez": live, "/readyz": ready}
        self._server: asyncio.Server | None = None
        self.address = ""
        """``host:port`` it listens on, once started."""

    async def start(self) -> str:
        """Listen; returns ``host:port`` (the port picked when it was 0)."""
        if self._server is not None:
            raise RuntimeError("the probe server is already running")
        try:
            self._server = await asyncio.start_server(self._answer, self.host, self.port)
        except OSError as error:
            raise OSError(
                f"cannot serve health probes on {self.host}:{self.port}: {error}"
            ) from error
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"{self.host}:{port}"
        _LOG.info("health probes on http://%s (/livez, /readyz)", self.address)
        return self.address

    async def stop(self) -> None:
        """Stop listening and close open probe connections."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body = self._respond(head[:_MAX_REQUEST_BYTES])
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, body = "400 Bad Request", "bad request"
        except Exception as error:  # a failing check is a failing probe, not a crash
            status, body = "503 Service Unavailable", f"check failed: {error}"
        payload = f"{body}\n".encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    def _respond(self, head: bytes) -> tuple[str, str]:
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        check = self._checks.get(path)
        if check is None:
            return "404 Not Found", "not found: try /livez or /readyz"
        if method != "GET":
            return "405 Method Not Allowed", "use GET"
        reason = check()
        if reason is None:
            return "200 OK", "ok"
        return "503 Service Unavailable", reason
