"""A TCP proxy between processes that injects network faults, one link at a time.

``FaultProxy`` runs on its own event loop thread. Each *link* is one listening
loopback port forwarding to the same upstream address (the engine); give each
process its own link (``proxy.address(link)`` as its server address) so a fault
hits exactly that process's connections. Every method is thread-safe.

Faults, per link:

* ``reset(link)``: every open connection of the link ends with a TCP RST
  (``SO_LINGER`` 0) on both sides, as when a middlebox drops state.
* ``black_hole(link, seconds, heal=)``: for ``seconds`` the link accepts bytes and
  new connections but forwards nothing, not even a side's close or reset (a
  partition: neither end hears of the other). ``heal=True`` then delivers what waited (a
  partition that healed before TCP gave up); ``heal=False`` resets every connection
  open during it (one that did not).
* ``slow(link, seconds, latency=, bytes_per_second=)``: for ``seconds`` each chunk
  waits ``latency`` plus its size over ``bytes_per_second`` before it is forwarded.

A connection whose upstream refuses (the engine is down) is reset at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dex_agents.testing._ports import LOOPBACK_HOST

__all__ = ["FaultProxy"]

_T = TypeVar("_T")
CHUNK_BYTES = 64 * 1024


@dataclass(eq=False)
class _Connection:
    downstream: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list[asyncio.Task[None]])
    held: bool = False
    """Whether a black hole held this connection (it was open or opened during one)."""

    def reset(self) -> None:
        """End both sides with a TCP RST and stop the pumps."""
        for writer in (self.downstream, self.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()

    def close(self) -> None:
        """End both sides with a normal close (one side closed or broke on its own)."""
        for writer in (self.downstream, self.upstream):
            if writer is not None:
                writer.close()


class _Link:
    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.server: asyncio.Server | None = None
        self.connections: set[_Connection] = set()
        self.open = asyncio.Event()
        self.open.set()
        self.black_hole_ends = 0
        """How many black holes began: a black hole ends only if no later one began."""
        self.latency = 0.0
        self.bytes_per_second = 0.0
        self.slow_ends = 0
        self.connections_made = 0

    async def pass_through(self, connection: _Connection, size: int) -> None:
        """Wait until a chunk of ``size`` bytes may be forwarded."""
        if not self.open.is_set():
            await self.open.wait()
        delay = self.latency + (size / self.bytes_per_second if self.bytes_per_second else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)

    def reset(self) -> int:
        connections = list(self.connections)
        self.connections.clear()
        for connection in connections:
            connection.reset()
        return len(connections)


class FaultProxy:
    """Loopback links to ``upstream`` (``host:port``) whose connections take faults.

    ``FaultProxy.start(upstream, ["worker-0", "client"])`` returns once every link
    listens; ``close()`` resets every connection and stops the thread.
    """

    def __init__(self, upstream: str, links: list[str]) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy")
        self._thread.daemon = True
        self._link_names = list(links)
        self._links: dict[str, _Link] = {}

    @classmethod
    def start(cls, upstream: str, links: list[str]) -> FaultProxy:
        proxy = cls(upstream, links)
        proxy._thread.start()
        proxy._run(proxy._listen())
        return proxy

    @property
    def links(self) -> list[str]:
        return list(self._link_names)

    def address(self, link: str) -> str:
        """``host:port`` a process connects to for ``link``."""
        return f"{LOOPBACK_HOST}:{self._links[link].port}"

    def connections(self, link: str) -> int:
        """How many connections ``link`` has open now."""
        return self._run(self._count(link))

    def connections_made(self, link: str) -> int:
        """How many connections ``link`` accepted so far."""
        return self._links[link].connections_made

    def reset(self, link: str) -> int:
        """Reset every open connection of ``link``; returns how many there were."""
        return self._call(self._links[link].reset)

    def black_hole(self, link: str, seconds: float, *, heal: bool) -> None:
        """Forward nothing on ``link`` for ``seconds``; then deliver (``heal``) or reset."""
        self._call(lambda: self._begin_black_hole(self._links[link], seconds, heal))

    def slow(
        self, link: str, seconds: float, *, latency: float, bytes_per_second: float = 0.0
    ) -> None:
        """Delay each chunk on ``link`` by ``latency`` s (and throttle) for ``seconds``."""
        self._call(lambda: self._begin_slow(self._links[link], seconds, latency, bytes_per_second))

    def close(self) -> None:
        """Reset every connection, stop listening and stop the proxy's thread."""
        if not self._loop.is_running():
            return
        self._run(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    # --- on the proxy's loop ---------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _call(self, function: Callable[[], _T]) -> _T:
        result: Future[_T] = Future()

        def call() -> None:
            try:
                result.set_result(function())
            except BaseException as error:  # handed to the caller
                result.set_exception(error)

        self._loop.call_soon_threadsafe(call)
        return result.result()

    async def _count(self, link: str) -> int:
        return len(self._links[link].connections)

    async def _listen(self) -> None:
        for name in self._link_names:
            link = _Link(name)
            link.server = await asyncio.start_server(
                lambda reader, writer, link=link: self._serve(link, reader, writer),
                LOOPBACK_HOST,
                0,
            )
            link.port = link.server.sockets[0].getsockname()[1]
            self._links[name] = link

    async def _shutdown(self) -> None:
        for link in self._links.values():
            link.open.set()
            if link.server is not None:
                link.server.close()
            link.reset()
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _begin_black_hole(self, link: _Link, seconds: float, heal: bool) -> None:
        link.black_hole_ends += 1
        number = link.black_hole_ends
        link.open.clear()
        for connection in link.connections:
            connection.held = True

        def end() -> None:
            if link.black_hole_ends != number:
                return  # a later black hole on this link runs on
            if not heal:
                for connection in list(link.connections):
                    if connection.held:
                        link.connections.discard(connection)
                        connection.reset()
            link.open.set()

        self._loop.call_later(seconds, end)

    def _begin_slow(
        self, link: _Link, seconds: float, latency: float, bytes_per_second: float
    ) -> None:
        link.slow_ends += 1
        number = link.slow_ends
        link.latency, link.bytes_per_second = latency, bytes_per_second

        def end() -> None:
            if link.slow_ends == number:
                link.latency, link.bytes_per_second = 0.0, 0.0

        self._loop.call_later(seconds, end)

    async def _serve(
        self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        # A connection handler that ends cancelled makes asyncio's stream callback log a
        # traceback (Python 3.11): the proxy's close ends every handler quietly instead.
        with contextlib.suppress(asyncio.CancelledError):
            await self._forward(link, reader, writer)

    async def _forward(
        self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        connection = _Connection(writer, held=not link.open.is_set())
        link.connections.add(connection)
        link.connections_made += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            link.connections.discard(connection)
            connection.reset()
            return
        connection.upstream = upstream_writer
        if connection not in link.connections:  # reset while it connected
            connection.reset()
            return
        connection.tasks = [
            asyncio.ensure_future(self._pump(link, connection, reader, upstream_writer)),
            asyncio.ensure_future(self._pump(link, connection, upstream_reader, writer)),
        ]
        await asyncio.gather(*connection.tasks, return_exceptions=True)
        link.connections.discard(connection)
        connection.close()

    async def _pump(
        self,
        link: _Link,
        connection: _Connection,
        source: asyncio.StreamReader,
        target: asyncio.StreamWriter,
    ) -> None:
        """Forward ``source`` to ``target`` through the link's faults; when either side
        ends or breaks, the whole connection ends (the caller closes what is left)."""
        try:
            while True:
                data = await source.read(CHUNK_BYTES)
                if not data:
                    break
                await link.pass_through(connection, len(data))
                target.write(data)
                await target.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        # Neither an end nor a break crosses a black hole: the other side learns of it
        # only when the black hole ends (or from its own keepalive).
        await link.pass_through(connection, 0)
        for task in connection.tasks:
            if task is not asyncio.current_task():
                task.cancel()
