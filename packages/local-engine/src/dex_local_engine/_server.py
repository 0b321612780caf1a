"""Running the engine: as an asyncio server, or embedded on a background thread.

The top of the engine's layers: it opens the store, builds the machine, attaches the
Workers' dispatcher to it, and serves the Clients' API and the Workers' task streams
over gRPC (and, if asked, in process) through the transport's interceptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine._api.service import FlowService
from dex_local_engine._machine.engine import Engine
from dex_local_engine._machine.retention import PURGE_BATCH
from dex_local_engine._rules.attribute_stores import AttributeStore
from dex_local_engine._rules.durability import DEFAULT_DURABILITY, Durability
from dex_local_engine._rules.limits import EngineLimits
from dex_local_engine._store.attribute_tables import AttributeStoreError, AttributeTable
from dex_local_engine._store.store import Store
from dex_local_engine._transport.auth import (
    BearerTokenInterceptor,
    InsecureListenError,
    check_listen_address,
)
from dex_local_engine._transport.in_process_server import (
    InProcessServer,
    collect_method_handlers,
    register,
    unregister,
)
from dex_local_engine._transport.request_checks import RequestCheckInterceptor
from dex_local_engine._workers.dispatch import Dispatcher
from dex_local_engine._workers.task_service import WorkerTaskService

_LOG = logging.getLogger("dex_local_engine")

KEEPALIVE_INTERVAL = timedelta(seconds=10)
"""How often the engine pings each connection (an HTTP/2 PING, idle or not)."""
KEEPALIVE_TIMEOUT = timedelta(seconds=10)
"""How long a ping may go unanswered before the engine drops the connection. A Worker
cut off without a reset (a network partition, a host that lost power) keeps its
connections open on the engine's side; without the pings, a task handed to one of its
idle pull streams would wait for as long as the partition lasts. Dropped, its streams
end like a dead Worker's, and their tasks go to a Worker that answers."""


class EngineStartError(RuntimeError):
    """The engine could not start: the port is busy, or the database or an Attribute
    Store's table is unusable."""


class EngineServer:
    """The engine's gRPC server on the running event loop.

    With ``in_process=True`` it also serves its address in process: Dex SDK async
    channels to exactly that address (once ``dex_local_engine.sdk_patches.
    route_in_process_channels()`` is applied) reach the same handlers without gRPC;
    see :mod:`dex_local_engine.in_process`. The gRPC port serves everyone else.

    ``attribute_stores`` are the Attribute Stores Flows may select, as Dex Server's
    configuration names them (see :class:`AttributeStore`); without them the engine
    knows none and refuses a Flow that names one, as a fresh Dex Server does.

    ``closed_flow_retention`` deletes the Flows that closed longer ago than that, with
    their history, Attributes and Stream messages: at start and then every
    ``retention_check_seconds(retention)``; ``None`` (the default) keeps closed Flows
    until their ID starts again. ``purge_closed_flows()`` does the same on demand.
    """

    def __init__(
        self,
        database: str | os.PathLike[str],
        host: str,
        port: int,
        durability: Durability | str = DEFAULT_DURABILITY,
        *,
        limits: EngineLimits | None = None,
        token: str | None = None,
        allow_insecure: bool = False,
        in_process: bool = False,
        attribute_stores: Sequence[AttributeStore] = (),
        closed_flow_retention: timedelta | None = None,
    ) -> None:
        if closed_flow_retention is not None and closed_flow_retention < timedelta(0):
            raise EngineStartError("closed_flow_retention must not be negative")
        self.closed_flow_retention = closed_flow_retention
        self._retention_task: asyncio.Task[None] | None = None
        if not 0 <= port <= 65535:
            raise EngineStartError(f"port {port} is out of range 0-65535")
        try:
            self.durability = Durability.parse(durability)
        except ValueError as error:
            raise EngineStartError(str(error)) from None
        if token is not None and not token.strip():
            raise EngineStartError("the bearer token must not be empty")
        try:
            check_listen_address(host, token=token, allow_insecure=allow_insecure)
        except InsecureListenError as error:
            raise EngineStartError(str(error)) from None
        self.database = os.fspath(database)
        self.host = host
        self.port = port
        self.limits = limits or EngineLimits()
        self._token = token
        self.in_process = in_process
        names = [store.name for store in attribute_stores]
        if len(set(names)) != len(names):
            raise EngineStartError(f"Attribute Store names must be unique, got {names}")
        self.attribute_stores = tuple(attribute_stores)
        self.address = ""
        self._server: Any = None
        self._in_process: InProcessServer | None = None
        self._engine: Engine | None = None
        self._dispatcher: Dispatcher | None = None
        self._store: Store | None = None

    async def start(self) -> str:
        """Open the database, recover its Flows and start serving; returns the address."""
        try:
            store = Store(self.database, self.durability)
        except Exception as error:
            raise EngineStartError(str(error)) from error
        self._store = store
        engine = Engine(store, attribute_cache_flows=self.limits.attribute_cache_flows)
        dispatcher = Dispatcher()
        dispatcher.frame_batch = engine.tx  # a Worker's waiting frames commit once
        engine.workers = dispatcher
        try:
            for attribute_store in self.attribute_stores:
                engine.attribute_tables[attribute_store.name] = AttributeTable(attribute_store)
        except AttributeStoreError as error:
            _close_tables(engine)
            store.close()
            raise EngineStartError(str(error)) from error
        try:
            engine.recover()
        except Exception as error:
            _close_tables(engine)
            store.close()
            raise EngineStartError(
                f"cannot load the engine state from {self.database!r}: {error}"
            ) from error
        self._engine = engine
        self._dispatcher = dispatcher
        if self.closed_flow_retention is not None:
            await self.purge_closed_flows(self.closed_flow_retention)
            self._retention_task = asyncio.get_running_loop().create_task(
                self._keep_retention(self.closed_flow_retention)
            )
        limits = self.limits
        dispatcher.max_task_bytes = limits.max_task_bytes
        dispatcher.max_value_bytes = limits.max_value_bytes
        dispatcher.max_streams_per_worker = limits.max_concurrent_streams_per_worker
        # Authentication first: an unauthenticated peer learns nothing, not even sizes.
        interceptors: list[grpc.aio.ServerInterceptor] = [
            *([BearerTokenInterceptor(self._token)] if self._token is not None else []),
            RequestCheckInterceptor(limits.max_value_bytes),
        ]
        servicers: list[tuple[Any, Any]] = [
            (cast(Any, pb_grpc).add_FlowServiceServicer_to_server, FlowService(engine)),
            (
                cast(Any, pb_grpc).add_WorkerTaskServiceServicer_to_server,
                WorkerTaskService(dispatcher),
            ),
        ]
        server = cast(Any, grpc).aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.max_receive_message_length", limits.max_request_bytes),
                ("grpc.max_send_message_length", limits.max_task_bytes),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.keepalive_time_ms", int(KEEPALIVE_INTERVAL.total_seconds() * 1000)),
                ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT.total_seconds() * 1000)),
                # Every ping, not only the keepalive's (gRPC's own default is 60 s).
                ("grpc.http2.ping_timeout_ms", int(KEEPALIVE_TIMEOUT.total_seconds() * 1000)),
                # Keep pinging a connection that carries no data (idle pull streams).
                ("grpc.http2.max_pings_without_data", 0),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
            ],
        )
        for add, servicer in servicers:
            add(servicer, server)
        target = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            bound = server.add_insecure_port(target)
        except Exception as error:
            await self._close_quietly()
            raise EngineStartError(f"cannot listen on {target}: {error}") from error
        if not bound:
            await self._close_quietly()
            raise EngineStartError(f"cannot listen on {target}: the address is in use")
        await server.start()
        self._server = server
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.address = f"{shown}:{bound}"
        if self.in_process:
            # The same handlers and interceptors, reached without a socket.
            self._in_process = InProcessServer(
                collect_method_handlers(servicers),
                interceptors,
                max_receive_bytes=limits.max_request_bytes,
                max_send_bytes=limits.max_task_bytes,
            )
            register(self.address, self._in_process)
        _LOG.info(
            "dex-local-engine listening on %s (database %s, durability %s)",
            self.address,
            self.database,
            self.durability.value,
        )
        return self.address

    async def purge_closed_flows(self, older_than: timedelta = timedelta(0)) -> int:
        """Delete every Flow that closed more than ``older_than`` ago, with its history,
        Attributes, Channel and Stream messages, in short transactions; then return the
        freed pages to the file system (a database this engine created; an older one
        reuses them). Returns how many Flows it deleted."""
        engine = self._engine
        if engine is None:
            raise RuntimeError("the engine is not running")
        seconds = older_than.total_seconds()
        purged = 0
        while True:
            batch = engine.purge_closed_flows(seconds)
            purged += batch
            if batch < PURGE_BATCH:
                break
            await asyncio.sleep(0)  # let the engine serve between batches
        if purged:
            engine.store.release_free_pages()
            _LOG.info("purged %d closed Flows older than %s", purged, older_than)
        return purged

    async def _keep_retention(self, retention: timedelta) -> None:
        interval = retention_check_seconds(retention)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.purge_closed_flows(retention)
            except Exception:  # logged; the next round tries again
                _LOG.exception("purging closed Flows failed")

    async def _close_quietly(self) -> None:
        if self._engine is not None:
            await self._engine.close()
            _close_tables(self._engine)
        if self._dispatcher is not None:
            await self._dispatcher.close()
        if self._store is not None:
            self._store.close()

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving and close the engine and its database."""
        task, self._retention_task = self._retention_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._engine is not None:
            self._engine.closing = True
            if self._server is not None:
                # Workers drain their streams and reconnect (to the next engine) by themselves.
                assert self._dispatcher is not None
                self._dispatcher.ask_to_reconnect("the engine is stopping")
                await asyncio.sleep(0.05)
        in_process, self._in_process = self._in_process, None
        if in_process is not None:
            unregister(self.address, in_process)
        stopping = [in_process.stop(grace)] if in_process is not None else []
        if self._server is not None:
            stopping.append(self._server.stop(grace))
            self._server = None
        await asyncio.gather(*stopping)
        await self._close_quietly()
        self._engine = None
        self._dispatcher = None
        self._store = None


def retention_check_seconds(retention: timedelta) -> float:
    """How often a retention period is applied: a tenth of it, between 1 s and 10 min."""
    return min(600.0, max(1.0, retention.total_seconds() / 10))


def _close_tables(engine: Engine) -> None:
    for table in engine.attribute_tables.values():
        table.close()
    engine.attribute_tables.clear()


class LocalEngine:
    """The engine on a background thread with its own event loop.

    >>> with LocalEngine() as engine:  # doctest: +SKIP
    ...     client = dex.Client(ClientOptions(server_address=engine.address))

    ``durability`` is ``Durability.PROCESS_CRASH`` (the default) or
    ``Durability.POWER_LOSS`` (an fsync per commit); see :class:`Durability`.
    ``in_process`` serves the address in process too (see ``EngineServer``); calls from
    other threads then hop onto the engine thread's loop. ``attribute_stores`` as for
    ``EngineServer``.
    """

    def __init__(
        self,
        database: str | os.PathLike[str] = ":memory:",
        host: str = "127.0.0.1",
        port: int = 0,
        durability: Durability | str = DEFAULT_DURABILITY,
        *,
        limits: EngineLimits | None = None,
        token: str | None = None,
        allow_insecure: bool = False,
        in_process: bool = False,
        attribute_stores: Sequence[AttributeStore] = (),
        closed_flow_retention: timedelta | None = None,
    ) -> None:
        self.closed_flow_retention = closed_flow_retention
        self._server: EngineServer | None = None
        self.durability = Durability.parse(durability)
        self.database = os.fspath(database)
        self.host = host
        self.port = port
        self.limits = limits or EngineLimits()
        self.token = token
        self.allow_insecure = allow_insecure
        self.in_process = in_process
        self.attribute_stores = tuple(attribute_stores)
        self._address = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def address(self) -> str:
        """``host:port`` the engine listens on, usable as the SDK's server address."""
        if not self._address:
            raise RuntimeError("the engine is not running; call start() first")
        return self._address

    def start(self) -> None:
        """Start the engine on its own thread; returns once it serves."""
        if self._thread is not None:
            raise RuntimeError("the engine was already started")
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="dex-local-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as error:  # reported to start() or logged
            if not self._ready.is_set():
                self._error = error
            else:
                _LOG.exception("dex-local-engine stopped with an error")
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        server = EngineServer(
            self.database,
            self.host,
            self.port,
            self.durability,
            limits=self.limits,
            token=self.token,
            allow_insecure=self.allow_insecure,
            in_process=self.in_process,
            attribute_stores=self.attribute_stores,
            closed_flow_retention=self.closed_flow_retention,
        )
        self._stopped = asyncio.Event()
        self._address = await server.start()
        self._server = server
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            await server.stop()

    def purge_closed_flows(self, older_than: timedelta = timedelta(0)) -> int:
        """``EngineServer.purge_closed_flows`` on the engine's thread."""
        server, loop = self._server, self._loop
        if server is None or loop is None or not self._address:
            raise RuntimeError("the engine is not running; call start() first")
        future = asyncio.run_coroutine_threadsafe(server.purge_closed_flows(older_than), loop)
        return future.result()

    def stop(self) -> None:
        """Stop the engine and wait for its thread."""
        thread, loop, stopped = self._thread, self._loop, self._stopped
        if thread is None:
            return
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        thread.join()
        self._thread = None
        self._address = ""

    def __enter__(self) -> LocalEngine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
