"""The fault-injection proxy's faults, on a loopback echo server: what arrives, what
does not, and how a connection ends.

No test asserts a duration: a black hole is checked by what has not arrived while it
lasts (it lasts far longer than the check) and by what arrives once it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from dex_agents.testing import poll_until
from dex_agents.testing._fault_proxy import FaultProxy
from dex_agents.testing._ports import LOOPBACK_HOST, find_free_loopback_ports

LINKS = ["a", "b"]


class Upstream:
    """An echo server that also records what it received."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                self.received += data
                writer.write(data)
                await writer.drain()
        writer.close()

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"{LOOPBACK_HOST}:{self.server.sockets[0].getsockname()[1]}"


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    echo = Upstream()
    echo.server = await asyncio.start_server(echo.serve, LOOPBACK_HOST, 0)
    yield echo
    echo.server.close()


@pytest.fixture
async def proxy(upstream: Upstream) -> AsyncIterator[FaultProxy]:
    started = await asyncio.to_thread(FaultProxy.start, upstream.address, LINKS)
    yield started
    await asyncio.to_thread(started.close)


async def connect(
    proxy: FaultProxy, link: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, _, port = proxy.address(link).rpartition(":")
    return await asyncio.open_connection(host, int(port))


async def ask(proxy: FaultProxy, link: str) -> bytes:
    reader, writer = await connect(proxy, link)
    writer.write(b"anyone?")
    return await reader.read(1)


async def test_bytes_pass_both_ways_in_order(proxy: FaultProxy) -> None:
    reader, writer = await connect(proxy, "a")
    payload = bytes(range(256)) * 2048  # 512 KiB, many chunks
    writer.write(payload)
    assert await reader.readexactly(len(payload)) == payload
    writer.close()


async def test_a_reset_ends_the_links_connections_with_an_rst(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    reader, writer = await connect(proxy, "a")
    other_reader, other_writer = await connect(proxy, "b")
    writer.write(b"hello")
    assert await reader.readexactly(5) == b"hello"
    await poll_until(lambda: proxy.connections("a") == 1, description="the connection")
    assert proxy.reset("a") == 1
    with pytest.raises(ConnectionResetError):
        await reader.read(1)  # an RST, not an orderly end of stream
    # The other link carries on.
    other_writer.write(b"still")
    assert await other_reader.readexactly(5) == b"still"
    other_writer.close()
    writer.close()


async def test_a_healed_black_hole_delivers_what_waited(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    reader, writer = await connect(proxy, "a")
    writer.write(b"before")
    assert await reader.readexactly(6) == b"before"
    proxy.black_hole("a", 3.0, heal=True)
    writer.write(b"during")
    await writer.drain()
    await asyncio.sleep(0.3)
    assert bytes(upstream.received) == b"before"  # nothing forwarded yet
    assert await reader.readexactly(6) == b"during"  # delivered once it healed
    writer.close()


async def test_an_unhealed_black_hole_resets_what_it_held(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    reader, writer = await connect(proxy, "a")
    writer.write(b"x")
    assert await reader.readexactly(1) == b"x"
    proxy.black_hole("a", 1.0, heal=False)
    writer.write(b"lost")
    with pytest.raises(ConnectionResetError):
        await reader.read(1)
    assert bytes(upstream.received) == b"x"
    # New connections pass again after it.
    reader, writer = await connect(proxy, "a")
    writer.write(b"again")
    assert await reader.readexactly(5) == b"again"
    writer.close()


async def test_a_slow_link_still_delivers_everything_in_order(proxy: FaultProxy) -> None:
    reader, writer = await connect(proxy, "b")
    proxy.slow("b", 30.0, latency=0.01, bytes_per_second=4_000_000)
    payload = bytes(range(256)) * 512
    writer.write(payload)
    assert await reader.readexactly(len(payload)) == payload
    writer.close()


async def test_a_connection_is_reset_while_the_upstream_is_down() -> None:
    (port,) = find_free_loopback_ports(1)  # nothing listens there
    proxy = await asyncio.to_thread(FaultProxy.start, f"{LOOPBACK_HOST}:{port}", ["a"])
    try:
        with pytest.raises(ConnectionResetError):  # at connect, or at the first read
            await ask(proxy, "a")
        assert proxy.connections_made("a") == 1
    finally:
        await asyncio.to_thread(proxy.close)
