"""MCP client sessions that last: one pooled session per server and Worker process.

Every request of a ``McpToolSource`` (listings, calls, task polls and cancellations,
the resource and prompt tools) runs on the server's pooled session, which is opened
on first use (handshake within the server's connection timeout, up to
``connection_attempts`` tries) and kept: a stdio server runs as one process per
Worker, a Streamable HTTP server keeps its ``Mcp-Session-Id``, so a task a server
binds to its MCP session is polled and cancelled on the session that started it.

A session is opened again when it is lost: a stdio server that exited, an HTTP
server that answers 404 to the session (it restarted, or ended the session). A
request that never reached the server (the HTTP connection was refused, or the
server no longer knew the session) is sent again on the new session; one that was
sent and broke off is not, and its caller decides by effect.

Sessions belong to the event loop that opened them (the Worker's); ``aclose`` ends
them. A stdio server starts through ``_launcher.py``, so it dies with its Worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import logging
import os
import sys
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client import ClientRequestContext
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Implementation, Result

from dex_agents.mcp._config import McpHttpServer, McpStdioServer
from dex_agents.mcp._tasks import (
    LEGACY_TASKS_PROTOCOL_VERSION,
    RELATED_TASK_META_KEY,
    CreatedTask,
    LegacyTaskInput,
    TaskChannel,
    TaskClaim,
)
from dex_agents.runner import ToolExecutionError

__all__ = [
    "CLIENT_INFO",
    "Connections",
    "OnTask",
    "PooledSession",
    "ResumedHttpSession",
    "ServerConfig",
    "describe",
    "innermost",
    "on_task_of_this_call",
    "reset_on_task",
]

logger = logging.getLogger("dex_agents.mcp")

CLIENT_INFO = Implementation(name="dex-agents", version="0.2.0")
_LAUNCHER = Path(__file__).with_name("_launcher.py")
_MCP_SESSION_ID = "mcp-session-id"

ServerConfig = McpStdioServer | McpHttpServer
OnTask = Callable[[CreatedTask, ClientSession], Awaitable[CallToolResult]]
"""What a ``tools/call`` does with a task the server created for it."""
_T = TypeVar("_T")
_R = TypeVar("_R", bound=Result)

_on_task: contextvars.ContextVar[OnTask | None] = contextvars.ContextVar(
    "dex_agents_mcp_on_task", default=None
)


def on_task_of_this_call(on_task: OnTask) -> contextvars.Token[OnTask | None]:
    """Route a task created by the ``tools/call`` this context sends to ``on_task``."""
    return _on_task.set(on_task)


def reset_on_task(token: contextvars.Token[OnTask | None]) -> None:
    """Undo ``on_task_of_this_call``."""
    _on_task.reset(token)


async def _route_task(created: CreatedTask, session: ClientSession) -> CallToolResult:
    on_task = _on_task.get()
    if on_task is None:
        raise ToolExecutionError(f"the MCP server started task {created.task_id} unasked")
    return await on_task(created, session)


@dataclass(eq=False)
class PooledSession:
    """One lasting MCP client session to one server."""

    server: ServerConfig
    _client: Client | None = None
    channel: TaskChannel = field(default_factory=TaskChannel)
    session_id: str | None = None
    """The Streamable HTTP server's ``Mcp-Session-Id``, when it keeps sessions."""
    lost: bool = False
    """The session ended: the stdio server exited, the transport broke, or the server
    answered 404 to the session."""
    unsent: int = 0
    """How many requests never reached the server (a refused connection, a 404)."""
    inboxes: dict[str, LegacyTaskInput] = field(default_factory=dict[str, LegacyTaskInput])
    """Where a 2025-11-25 task's input requests go, by task ID, while a poll waits."""
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _owner: asyncio.Task[None] | None = None
    _scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """Cancels the owner the anyio way, which the SDK's shielded shutdown honours (a native
    ``Task.cancel`` can cut that shutdown short and leave the server running)."""

    @property
    def client(self) -> Client:
        """The connected client."""
        if self._client is None:
            raise RuntimeError("the pooled MCP session is not open")
        return self._client

    @property
    def session(self) -> ClientSession:
        """The connected client's protocol session."""
        return self.client.session

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        related: Any = (params.meta or {}).get(RELATED_TASK_META_KEY)
        task_id = related.get("taskId") if isinstance(related, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        inbox = self.inboxes.get(task_id) if isinstance(task_id, str) else None
        if inbox is None:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST, message="this client cannot ask the user for input"
            )
        return await inbox(context, params)

    def close(self) -> None:
        self.lost = True
        self._stop.set()

    def abort(self) -> None:
        """Stop opening: the owner winds the transport down (stopping a stdio server)."""
        self.close()
        self._scope.cancel()

    @property
    def owner(self) -> asyncio.Task[None] | None:
        """The task that holds the session open."""
        return self._owner

    async def open(self) -> None:
        """Connect and shake hands; raises what broke. The session is held by its own task."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Read even when the caller stopped waiting: a late failure is not "never retrieved".
        ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._owner = asyncio.ensure_future(self._hold(ready))
        try:
            async with asyncio.timeout(self.server.connection_timeout_seconds):
                await asyncio.shield(ready)
        except BaseException:
            self.abort()
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        # Entered and left in this one task, as the SDK's task groups require.
        try:
            self.channel = TaskChannel(on_closed=self._transport_closed)
            with self._scope:
                async with Client(
                    self.channel.wrap(self._transport()),
                    cache=None,
                    client_info=CLIENT_INFO,
                    extensions=[TaskClaim(_route_task)],
                    elicitation_callback=self._elicit,
                ) as client:
                    self._client = client
                    if not ready.done():
                        ready.set_result(None)
                    await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                if isinstance(error, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(error)
            elif not isinstance(error, asyncio.CancelledError):
                logger.info("MCP session to server %s ended: %s", self.server.name, describe(error))
        finally:
            self.lost = True
            if not ready.done():
                ready.set_exception(ConnectionError("the MCP session ended while opening"))

    def _transport_closed(self) -> None:
        self.lost = True

    def _transport(self) -> Any:
        server = self.server
        if isinstance(server, McpStdioServer):
            return stdio_client(
                StdioServerParameters(
                    command=sys.executable,
                    args=[
                        "-I",
                        str(_LAUNCHER),
                        str(os.getpid()),
                        server.name,
                        server.command,
                        *server.args,
                    ],
                    env=server.env,
                    cwd=server.cwd,
                )
            )
        http = httpx2.AsyncClient(
            headers=dict(server.headers),
            timeout=_HTTP_TIMEOUT,
            transport=_WatchedTransport(self),
            event_hooks={"response": [self._saw_response]},
        )
        return _closing_http(streamable_http_client(server.url, http_client=http), http)

    async def _saw_response(self, response: httpx2.Response) -> None:
        sent_id = response.request.headers.get(_MCP_SESSION_ID)
        if response.status_code == 404 and sent_id is not None and sent_id == self.session_id:
            # The server no longer knows the session: it ran nothing of this request.
            self.unsent += 1
            self.lost = True
        given = response.headers.get(_MCP_SESSION_ID)
        if given and self.session_id is None:
            self.session_id = given

    async def shutdown(self) -> None:
        """End the session: the stdio server is stopped, an HTTP session ended with DELETE.

        Waits for the SDK's own bounded shutdown (a stdio server gets its stdin closed,
        then SIGTERM, then SIGKILL, a few seconds at most); past 15 s it is abandoned.
        """
        self.close()
        owner = self._owner
        if owner is None or owner.done():
            return
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(owner)
        except (TimeoutError, Exception):
            self._scope.cancel()
            with contextlib.suppress(TimeoutError, Exception):
                async with asyncio.timeout(10):
                    await asyncio.shield(owner)


class _WatchedTransport(httpx2.AsyncBaseTransport):
    """Counts POSTs that never reached the server (the connection was refused)."""

    def __init__(self, session: PooledSession) -> None:
        self._session = session
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.ConnectError:
            if request.method == "POST":
                self._session.unsent += 1
            self._session.lost = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class _closing_http:
    """The SDK's HTTP transport, closing our HTTP client after it."""

    def __init__(self, inner: Any, http: httpx2.AsyncClient) -> None:
        self._inner = inner
        self._http = http

    async def __aenter__(self) -> Any:
        return await self._inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            await self._http.aclose()


class ResumedHttpSession:
    """Requests on the MCP session another Worker opened, by its ``Mcp-Session-Id``.

    No handshake: the server knows the session already. Only the task requests use it
    (``tasks/get``, ``tasks/result``, ``tasks/cancel``), so a Worker reaches the task
    another Worker started on a server that binds tasks to sessions. A server that
    forgot the session answers 404, which fails the request.
    """

    protocol_version: str | None = LEGACY_TASKS_PROTOCOL_VERSION

    def __init__(self, server: McpHttpServer, session_id: str) -> None:
        self.server = server
        self.session_id = session_id
        self._ids = itertools.count(1)

    async def send_request(self, request: Any, result_type: type[_R]) -> _R:
        request_id = f"dex-agents-resumed-{next(self._ids)}"
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            **request.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        headers = {
            **self.server.headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            _MCP_SESSION_ID: self.session_id,
            "mcp-protocol-version": LEGACY_TASKS_PROTOCOL_VERSION,
        }
        async with (
            httpx2.AsyncClient(timeout=_HTTP_TIMEOUT) as http,
            asyncio.timeout(self.server.connection_timeout_seconds),
        ):
            response = await http.post(self.server.url, json=body, headers=headers)
        answer = _answer_of(response, request_id)
        if answer is None:
            reason = (
                "the server no longer knows the session"
                if response.status_code == 404
                else f"HTTP {response.status_code} without an answer"
            )
            raise MCPError(code=mcp_types.INVALID_REQUEST, message=reason)
        if "error" in answer:
            raise MCPError.from_error_data(mcp_types.ErrorData.model_validate(answer["error"]))
        return result_type.model_validate(answer.get("result") or {})


def _answer_of(response: httpx2.Response, request_id: str) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``request_id`` in a JSON or an SSE response body."""
    kind = response.headers.get("content-type", "").lower()
    texts: list[str] = []
    if kind.startswith("application/json"):
        texts.append(response.text)
    elif kind.startswith("text/event-stream"):
        # Each event's data; a server may send an empty priming event first.
        texts.extend(
            line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")
        )
    for text in texts:
        try:
            message: Any = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == request_id:  # pyright: ignore[reportUnknownMemberType]
            return message  # pyright: ignore[reportUnknownVariableType]
    return None


class Connections:
    """The pooled sessions of one source, per event loop; ``attempts`` tries to connect."""

    def __init__(self, *, attempts: int) -> None:
        self.attempts = attempts
        self._pools: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, PooledSession]
        ] = weakref.WeakKeyDictionary()
        self._locks: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()
        self._opened: weakref.WeakSet[PooledSession] = weakref.WeakSet()
        """Every session opened or being opened, so ``aclose`` waits for each to wind down."""

    def _pool(self) -> dict[str, PooledSession]:
        return self._pools.setdefault(asyncio.get_running_loop(), {})

    def pooled(self, server: ServerConfig) -> PooledSession | None:
        """The open session of ``server`` in this loop, without connecting."""
        session = self._pool().get(server.name)
        return session if session is not None and not session.lost else None

    async def acquire(self, server: ServerConfig) -> PooledSession:
        """The server's open session, connecting after at most ``attempts`` tries.

        Connecting that keeps failing raises ``ToolExecutionError``: nothing was sent.
        """
        session = self.pooled(server)
        if session is not None:
            return session
        locks = self._locks.setdefault(asyncio.get_running_loop(), {})
        async with locks.setdefault(server.name, asyncio.Lock()):
            session = self.pooled(server)
            if session is not None:
                return session
            errors: list[str] = []
            for _ in range(self.attempts):
                session = PooledSession(server)
                self._opened.add(session)
                try:
                    await session.open()
                except Exception as error:
                    errors.append(describe(error))
                    continue
                old = self._pool().get(server.name)
                if old is not None:
                    old.close()
                self._pool()[server.name] = session
                return session
            raise ToolExecutionError(
                f"cannot connect to MCP server {server.name} after "
                f"{self.attempts} attempts: {errors[-1]}"
            )

    async def run(
        self, server: ServerConfig, operation: Callable[[PooledSession], Awaitable[_T]]
    ) -> _T:
        """``operation`` on the server's session; a request that never reached the server
        (the session was gone) runs again on a new session, up to ``attempts`` times."""
        for attempt in range(1, self.attempts + 1):
            session = await self.acquire(server)
            unsent = session.unsent
            try:
                return await operation(session)
            except Exception:
                if session.unsent > unsent and attempt < self.attempts:
                    session.close()
                    continue
                if session.lost:
                    session.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """End every session of this loop, and wait for the ones still opening to stop."""
        loop = asyncio.get_running_loop()
        self._pool().clear()
        sessions = [
            session
            for session in list(self._opened)
            if session.owner is not None and session.owner.get_loop() is loop
        ]
        for session in sessions:
            self._opened.discard(session)
        await asyncio.gather(*(session.shutdown() for session in sessions))


def describe(error: BaseException) -> str:
    """The innermost error of an SDK task group, which says what actually broke."""
    leaf = innermost(error)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def innermost(error: BaseException) -> BaseException:
    # getattr, not isinstance: narrowing to BaseExceptionGroup loses the element type.
    inner: Sequence[BaseException] = getattr(error, "exceptions", ())
    return innermost(inner[0]) if inner else error


# The MCP transports' own defaults: 30 s to connect, write and wait for a pooled
# connection, 5 min to read, since a server may hold a response stream open.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
