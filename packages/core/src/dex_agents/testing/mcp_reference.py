"""The official MCP reference servers, and servers that misbehave, for tests.

``ReferenceServers.install()`` runs ``npm ci`` once per pinned lock file
(``packages/core/tests/mcp/reference_servers``, or ``DEX_AGENTS_MCP_REFERENCE_LOCK_DIR``)
into a cache directory (``~/.cache/dex-agents-tests``, or ``DEX_AGENTS_TEST_CACHE``) and
returns ``None`` with the reason when node or npm is missing, so a test can skip saying
why. The servers: ``@modelcontextprotocol/server-everything`` (stdio and Streamable
HTTP), ``server-memory`` and ``server-filesystem`` (stdio) from npm, and
``mcp-server-time`` (stdio) from PyPI, a dev dependency.

The misbehaving ones: ``hung_stdio_server`` starts and never answers, ``garbage_stdio_server``
prints junk and never answers, ``HungHttpServer`` accepts connections and never answers,
``GarbageHttpServer`` answers every request with a page that is not MCP.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Self

from dex_agents.mcp import McpHttpServer, McpStdioServer
from dex_agents.testing._ports import find_free_loopback_ports
from dex_agents.testing._processes import ChildProcess

__all__ = [
    "GarbageHttpServer",
    "HungHttpServer",
    "ReferenceServers",
    "garbage_stdio_server",
    "hung_stdio_server",
    "time_server",
]

_LOCK_FILES = ("package.json", "package-lock.json")
_SCOPE = "@modelcontextprotocol"


def _lock_directory() -> Path:
    configured = os.environ.get("DEX_AGENTS_MCP_REFERENCE_LOCK_DIR")
    if configured:
        return Path(configured)
    # packages/core/src/dex_agents/testing/ -> packages/core/tests/mcp/reference_servers
    return Path(__file__).resolve().parents[3] / "tests" / "mcp" / "reference_servers"


def _cache_root() -> Path:
    configured = os.environ.get("DEX_AGENTS_TEST_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "dex-agents-tests"


class ReferenceServers:
    """The npm reference servers, installed from the pinned lock file."""

    def __init__(self, node_modules: Path) -> None:
        self.node_modules = node_modules
        self.node = shutil.which("node") or "node"

    @classmethod
    def install(cls) -> tuple[ReferenceServers | None, str]:
        """The installed servers, or ``None`` and why they cannot be installed."""
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            return None, "node and npm are not installed (every machine and CI has them)"
        source = _lock_directory()
        if not all((source / name).is_file() for name in _LOCK_FILES):
            return None, f"the reference servers' lock files are not in {source}"
        digest = hashlib.sha256()
        for name in _LOCK_FILES:
            digest.update((source / name).read_bytes())
        directory = _cache_root() / f"mcp-reference-{digest.hexdigest()[:16]}"
        directory.mkdir(parents=True, exist_ok=True)
        done = directory / ".installed"
        # One install per lock, also across pytest-xdist workers.
        with (directory / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                for name in _LOCK_FILES:
                    shutil.copyfile(source / name, directory / name)
                result = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=directory,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
                if result.returncode != 0:
                    return None, f"npm ci of the reference servers failed: {result.stderr[-800:]}"
                done.write_text("ok")
        return cls(directory / "node_modules"), ""

    def _entry(self, package: str) -> str:
        return str(self.node_modules / _SCOPE / package / "dist" / "index.js")

    def everything(self, name: str = "everything") -> McpStdioServer:
        """server-everything over stdio."""
        return McpStdioServer(
            name=name, command=self.node, args=(self._entry("server-everything"), "stdio")
        )

    def memory(self, memory_file: Path, name: str = "memory") -> McpStdioServer:
        """server-memory over stdio, its knowledge graph in ``memory_file``."""
        return McpStdioServer(
            name=name,
            command=self.node,
            args=(self._entry("server-memory"),),
            env={"MEMORY_FILE_PATH": str(memory_file)},
        )

    def filesystem(self, root: Path, name: str = "files") -> McpStdioServer:
        """server-filesystem over stdio, allowed to use ``root`` only."""
        return McpStdioServer(
            name=name, command=self.node, args=(self._entry("server-filesystem"), str(root))
        )

    def everything_http(self, log_path: Path) -> EverythingHttpServer:
        """server-everything over Streamable HTTP, as a child process on a loopback port."""
        return EverythingHttpServer(self.node, self._entry("server-everything"), log_path)


def time_server(name: str = "time") -> McpStdioServer:
    """``mcp-server-time`` from PyPI over stdio (installed beside this Python)."""
    command = Path(sys.executable).with_name("mcp-server-time")
    return McpStdioServer(
        name=name,
        command=str(command) if command.exists() else "mcp-server-time",
        args=("--local-timezone", "UTC"),
    )


class EverythingHttpServer:
    """server-everything's Streamable HTTP transport; it keeps one MCP session per client,
    and the tasks of a session in that session."""

    def __init__(self, node: str, entry: str, log_path: Path) -> None:
        self.port = find_free_loopback_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._command = [node, entry, "streamableHttp"]
        self.log_path = log_path
        self._process: ChildProcess | None = None

    def config(self, name: str = "everything", **options: object) -> McpHttpServer:
        """The server's configuration for a ``McpToolSource``."""
        return McpHttpServer.model_validate({"name": name, "url": self.url, **options})

    def sessions_opened(self) -> int:
        """How many MCP sessions the server has opened so far."""
        return self.read_log().count("Session initialized with ID")

    def read_log(self) -> str:
        return self._process.read_log() if self._process is not None else ""

    def start(self) -> Self:
        self._process = ChildProcess.spawn(
            self._command, log_path=self.log_path, environment={"PORT": str(self.port)}
        )
        self._process.wait_for_log_line("MCP Streamable HTTP Server listening", _START)
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


_START = timedelta(seconds=60)


def hung_stdio_server(name: str = "hung") -> McpStdioServer:
    """A stdio server that starts and never answers anything."""
    return McpStdioServer(
        name=name, command=sys.executable, args=("-c", "import time; time.sleep(3600)")
    )


def garbage_stdio_server(name: str = "garbage") -> McpStdioServer:
    """A stdio server that prints junk to stdout and never answers."""
    script = (
        "import sys, time\n"
        "for n in range(3):\n"
        "    sys.stdout.write('this is not JSON-RPC %d\\n' % n); sys.stdout.flush()\n"
        "time.sleep(3600)\n"
    )
    return McpStdioServer(name=name, command=sys.executable, args=("-c", script))


class _LoopbackListener:
    """A TCP listener on a loopback port, serving each connection in a thread."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.port = int(self._socket.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._connections: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def config(self, name: str, **options: object) -> McpHttpServer:
        """The server's configuration for a ``McpToolSource``."""
        return McpHttpServer.model_validate({"name": name, "url": self.url, **options})

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        self._socket.close()
        for connection in self._connections:
            with contextlib.suppress(OSError):
                connection.close()


class HungHttpServer(_LoopbackListener):
    """Accepts every connection and reads requests, but never answers."""

    def _serve(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while connection.recv(65536):
                pass


class GarbageHttpServer(_LoopbackListener):
    """Answers every request with a ``200`` HTML page that is not MCP."""

    def _serve(self, connection: socket.socket) -> None:
        page = b"<html>not an MCP server</html>"
        with contextlib.suppress(OSError), connection:
            connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                + f"content-length: {len(page)}\r\nconnection: close\r\n\r\n".encode()
                + page
            )
