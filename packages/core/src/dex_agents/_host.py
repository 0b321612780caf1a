"""``AgentHost``: runs session Flows on an embedded engine or on any Dex server.

One object owns what an application needs to run sessions: the engine (the
in-process ``dex-local-engine`` unless a server address is given), the Registry
with the session codecs, a blob cache, a pull ``AsyncWorker`` and the Client.
``start()`` returns once the engine answers and every pull queue registered;
``stop()`` drains the Worker and closes everything in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import dex
import grpc

from dex_agents._client import AgentSessionClient
from dex_agents._host_auth import authentication_error, resolve_credential
from dex_agents._host_options import (
    DeprecatedHostKeywords,
    EmbeddedEngine,
    EmbeddedEngineOptions,
    EmbeddedTransport,
    HealthProbes,
    SdkPatches,
    WorkerTuning,
    options_from_keywords,
)
from dex_agents._sdk_patches import (
    RunningPullTask,
    keep_finished_pull_streams,
    memoize_sdk_version,
    quiet_pull_worker_logs,
    route_in_process_channels,
    running_pull_tasks,
    track_running_pull_tasks,
)
from dex_agents._values import session_codec_registry
from dex_agents.session._flow import AgentSessionFlow

if TYPE_CHECKING:
    from dex_local_engine import EngineServer, LocalEngine, ProbeServer

__all__ = ["AgentHost", "StepsAbandoned"]

# The documented logger name (README), not the module's.
_LOG = logging.getLogger("dex_agents.host")
_T = TypeVar("_T")

SERVER_ADDRESS_VARIABLE = "DEX_SERVER_ADDRESS"
IDLE_STREAMS_PER_QUEUE = 2
"""Idle pull streams kept per queue. With Dex's default of one, the stream that just
sent a Step's result retires while the engine may already be handing it the session's
next Step; that task is rejected and dispatched again, a few ms per turn in one session
and far more with many sessions at once (benchmarks/session_turns.py: 10 sessions x 3
turns went from about 13 to 22-29 turns/s)."""
BLOB_CACHE_BYTES = 64 * 1024 * 1024
SERVER_RETRY_FIRST_SECONDS = 0.1
SERVER_RETRY_MAX_SECONDS = 2.0
"""``start()`` retries an unavailable server this often (doubling from the first), for
``registration_timeout`` at most."""
DRAIN_CANCEL_GRACE = timedelta(seconds=10)
"""How much longer than ``drain_timeout`` the SDK's own drain deadline is: the host
cancels what still runs at ``drain_timeout`` itself, after naming it."""
WAIT_FOREVER = timedelta(days=36500)
"""The SDK drain deadline for ``drain_timeout=None`` (the SDK has no "no deadline")."""


class StepsAbandoned(SystemExit):
    """``AgentHost.serve()`` stopped with Steps still running at ``drain_timeout``.

    A ``SystemExit`` with status ``EXIT_STATUS`` (75, ``EX_TEMPFAIL``): uncaught, the
    process exits with it and no traceback, so an orchestrator sees an unclean stop.
    ``steps`` names each abandoned Step (``AgentHost.abandoned_steps``); the engine
    runs each again on another Worker.
    """

    __module__ = "dex_agents"  # the public import path, as tracebacks show it

    EXIT_STATUS = 75
    """The exit status: ``EX_TEMPFAIL`` of sysexits.h, "try again later"."""

    def __init__(self, steps: Sequence[str]) -> None:
        super().__init__(self.EXIT_STATUS)
        self.steps: tuple[str, ...] = tuple(steps)
        """The abandoned Steps, as ``AgentHost.abandoned_steps`` names them."""


class AgentHost:
    """Runs ``flows``: the engine (embedded unless given an address), Worker and Client.

    ``server_address`` names a Dex server (Dex Server, or ``dex-local-engine
    serve``); without one the host reads ``DEX_SERVER_ADDRESS``, and when that is
    unset too it starts the local engine in this process on ``database`` (a
    SQLite file, or ``":memory:"``). The Worker and Client code is the same either way.

    ``auth_token`` is the bearer token the Client and the Worker send to a Dex server
    that requires one (``dex-local-engine serve --token-file``, Dex Server with
    authentication): a ``str``, or any ``dex.Credential`` (``dex.FileCredential`` reads
    a token file and follows its rotations). Without it the host reads
    ``DEX_SERVER_TOKEN``. A refused token fails ``start()`` with ``AuthenticationError``.
    The SDK speaks plaintext gRPC, so the token crosses the network in clear text: keep
    the server on loopback or a private network, or behind a TLS-terminating proxy. The
    embedded engine takes no token.

    ``health`` (``HealthProbes``) serves HTTP ``/livez`` and ``/readyz`` for an
    orchestrator. ``stop()`` lets running Steps finish for ``worker_tuning.drain_timeout``
    (30 s by default), then names and cancels the rest; ``serve()`` then exits with
    ``StepsAbandoned`` (status 75).

    ``worker=False`` runs no Worker (a process that only starts sessions and calls
    their RPCs); ``client=False`` runs no Client (a Worker-only process, usually
    with ``await host.serve()``).

    ``session_codecs`` (default on) decodes with ``session_codec_registry()``: tolerant
    session codecs that decode each stored message once per process.
    ``blob_cache_directory`` is where large values are cached (a temporary directory
    by default).

    The tuning has three groups, each a frozen dataclass with one docstring per field:
    ``engine_options`` (``EmbeddedEngineOptions``: where the embedded engine runs and
    how the host reaches it), ``worker_tuning`` (``WorkerTuning``: task slots and the
    registration timeout) and ``sdk_patches`` (``SdkPatches``: the version-gated
    patches of dex-python-sdk applied before the Worker starts). The older keywords
    (``embedded_engine``, ``embedded_transport``, ``max_concurrent_tasks``,
    ``registration_timeout``, ``memoize_sdk_version``, ``keep_pull_streams``) still
    work for one release, with a ``DeprecationWarning``.

    Use ``async with AgentHost(flow) as host:`` in async code. In sync code, ``with
    AgentHost(flow) as host:`` runs the host on a background event loop and
    ``host.call(coroutine)`` runs a coroutine there and returns its result.
    """

    def __init__(
        self,
        flows: dex.Flow[Any] | Sequence[dex.Flow[Any]],
        *,
        database: str | os.PathLike[str] = ":memory:",
        server_address: str | None = None,
        auth_token: str | dex.Credential | None = None,
        worker: bool = True,
        client: bool = True,
        session_codecs: bool = True,
        blob_cache_directory: str | os.PathLike[str] | None = None,
        engine_options: EmbeddedEngineOptions | None = None,
        worker_tuning: WorkerTuning | None = None,
        sdk_patches: SdkPatches | None = None,
        health: HealthProbes | None = None,
        **deprecated: Unpack[DeprecatedHostKeywords],
    ) -> None:
        self.flows: tuple[dex.Flow[Any], ...] = (
            (flows,) if isinstance(flows, dex.Flow) else tuple(flows)
        )
        if not self.flows:
            raise ValueError("AgentHost needs at least one Flow")
        for flow in self.flows:
            if not isinstance(flow, dex.Flow):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"AgentHost runs dex.Flow objects, got {type(flow).__name__}")
        if not worker and not client:
            raise ValueError("an AgentHost with neither a Worker nor a Client does nothing")
        engine_options, worker_tuning, sdk_patches = options_from_keywords(
            deprecated,
            _option(engine_options, EmbeddedEngineOptions, "engine_options"),
            _option(worker_tuning, WorkerTuning, "worker_tuning"),
            _option(sdk_patches, SdkPatches, "sdk_patches"),
        )
        self.engine_options: EmbeddedEngineOptions = engine_options
        """Where the embedded engine runs and how the host reaches it."""
        self.worker_tuning: WorkerTuning = worker_tuning
        """How the host's Worker runs."""
        self.sdk_patches: SdkPatches = sdk_patches
        """The SDK patches the host applies before its Worker starts."""
        if health is not None and not isinstance(health, HealthProbes):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"health must be a HealthProbes or None, got {type(health).__name__}")
        self.health: HealthProbes | None = health
        """The HTTP probes the host serves, or ``None``."""
        self.abandoned_steps: tuple[str, ...] = ()
        """The Steps the last ``stop()`` abandoned at ``drain_timeout`` (empty: none)."""
        self.database = os.fspath(database)
        self._requested_address = server_address or os.environ.get(SERVER_ADDRESS_VARIABLE) or None
        if self._requested_address is None and auth_token is not None:
            raise ValueError(
                "auth_token is for a Dex server: give server_address (or set "
                f"{SERVER_ADDRESS_VARIABLE}); the embedded engine takes no token"
            )
        self._credential: dex.Credential | None = (
            resolve_credential(auth_token) if self._requested_address is not None else None
        )
        self.runs_worker = worker
        self.runs_client = client
        self.registry = dex.Registry(
            list(self.flows),
            session_codec_registry() if session_codecs else None,
            allow_async_handlers=True,
        )
        self._blob_cache_directory = (
            Path(blob_cache_directory) if blob_cache_directory is not None else None
        )
        self._owned_cache_directory: Path | None = None
        self._address: str | None = None
        self._engine: LocalEngine | None = None
        self._engine_server: EngineServer | None = None
        self._blob_cache: dex.BlobCache | None = None
        self._client: dex.AsyncClient | None = None
        self._worker: dex.AsyncWorker | None = None
        self._serving: asyncio.Task[None] | None = None
        self._stop_requested: asyncio.Event | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._probes: ProbeServer | None = None
        self._ready = False
        self._draining = False
        self._worker_stopped: asyncio.Future[None] | None = None

    # --- the older attributes (deprecated with their keywords) --------------------------

    @property
    def embedded_engine(self) -> EmbeddedEngine:
        """Deprecated: ``engine_options.placement``."""
        _warn_attribute("embedded_engine", "engine_options.placement")
        return self.engine_options.placement

    @property
    def embedded_transport(self) -> EmbeddedTransport:
        """Deprecated: ``engine_options.transport``."""
        _warn_attribute("embedded_transport", "engine_options.transport")
        return self.engine_options.transport

    @property
    def max_concurrent_tasks(self) -> int:
        """Deprecated: ``worker_tuning.max_concurrent_tasks``."""
        _warn_attribute("max_concurrent_tasks", "worker_tuning.max_concurrent_tasks")
        return self.worker_tuning.max_concurrent_tasks

    @property
    def registration_timeout(self) -> timedelta:
        """Deprecated: ``worker_tuning.registration_timeout``."""
        _warn_attribute("registration_timeout", "worker_tuning.registration_timeout")
        return self.worker_tuning.registration_timeout

    @property
    def memoize_sdk_version(self) -> bool:
        """Deprecated: ``sdk_patches.memoize_sdk_version``."""
        _warn_attribute("memoize_sdk_version", "sdk_patches.memoize_sdk_version")
        return self.sdk_patches.memoize_sdk_version

    @property
    def keep_pull_streams(self) -> bool:
        """Deprecated: ``sdk_patches.keep_pull_streams``."""
        _warn_attribute("keep_pull_streams", "sdk_patches.keep_pull_streams")
        return self.sdk_patches.keep_pull_streams

    # --- what runs -------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        """True when the host starts the local engine itself."""
        return self._requested_address is None

    @property
    def server_address(self) -> str:
        """``host:port`` of the Dex server in use (the embedded engine's once started)."""
        address = self._address or self._requested_address
        if address is None:
            raise RuntimeError("the embedded engine has not started; start the host first")
        return address

    @property
    def health_address(self) -> str | None:
        """``host:port`` of the HTTP probes while they are served, else ``None``."""
        return self._probes.address if self._probes is not None else None

    def _liveness(self) -> str | None:
        serving = self._serving
        if serving is not None and serving.done() and not self._draining:
            return "the Worker stopped"
        return None

    def _readiness(self) -> str | None:
        if self._draining:
            return "draining"
        if not self._ready:
            return "starting" if self._blob_cache is None or self._address is None else "stopped"
        if self.runs_worker and self._worker is None:
            return "the Worker is not running"
        return self._liveness()

    @property
    def dex_client(self) -> dex.AsyncClient:
        """The Dex ``AsyncClient``, for calls the session client does not wrap."""
        if self._client is None:
            raise RuntimeError(
                "this host has no Client (client=False)"
                if not self.runs_client
                else "the host is not running; use `async with AgentHost(...)` or start()"
            )
        return self._client

    @property
    def blob_cache(self) -> dex.BlobCache:
        if self._blob_cache is None:
            raise RuntimeError("the host is not running")
        return self._blob_cache

    @property
    def worker(self) -> dex.AsyncWorker | None:
        """The in-process Worker while it runs."""
        return self._worker

    def client(self, flow: AgentSessionFlow | None = None) -> AgentSessionClient:
        """An ``AgentSessionClient`` for ``flow``; optional when the host runs one session Flow."""
        if flow is None:
            sessions = [f for f in self.flows if isinstance(f, AgentSessionFlow)]
            if len(sessions) != 1:
                raise ValueError(
                    f"this host runs {len(sessions)} session Flows; pass the one you mean"
                )
            flow = sessions[0]
        elif flow not in self.flows:
            raise ValueError(f"the host does not run the Flow type {flow.get_flow_type()!r}")
        return AgentSessionClient(self.dex_client, flow)

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine (when embedded), blob cache, Client and Worker; return when ready."""
        if self._blob_cache is not None:
            raise RuntimeError("the host is already running")
        try:
            await self._start_probes()
            self._address = await self._start_engine()
            self._blob_cache = self._open_blob_cache()
            if self.runs_client:
                self._client = dex.AsyncClient(
                    self.registry,
                    self._blob_cache,
                    dex.ClientOptions(
                        server_address=self._address,
                        worker_target=dex.WorkerTarget(pull=True),
                        credential=self._credential,
                    ),
                )
            await self._await_server()
            if self.runs_worker:
                await self.start_worker()
        except BaseException:
            await self.stop()
            raise
        self._ready = True
        _LOG.info(
            "AgentHost ready on %s (%s; Flow types %s)",
            self._address,
            "Dex server" if self._requested_address is not None else "embedded engine",
            ", ".join(flow.get_flow_type() for flow in self.flows),
        )

    @property
    def authenticates(self) -> bool:
        """True when the host sends a bearer token (``auth_token`` or ``DEX_SERVER_TOKEN``)."""
        return self._credential is not None

    def _refusal(self, failure: BaseException, who: str) -> BaseException | None:
        return authentication_error(
            failure, address=self.server_address, who=who, sent_token=self.authenticates
        )

    async def _start_probes(self) -> None:
        if self.health is None:
            return
        # The engine package serves the probes (imported only when they are asked for).
        from dex_local_engine import ProbeServer

        probes = ProbeServer(
            self.health.host, self.health.port, live=self._liveness, ready=self._readiness
        )
        await probes.start()
        self._probes = probes

    async def _await_server(self) -> None:
        """Until the server answers a health check, for ``registration_timeout`` at most:
        an engine started together with this process may not listen yet."""
        assert self._address is not None
        assert self._blob_cache is not None
        if self._client is None and self.embedded:
            return  # the embedded engine listens once started
        client = self._client or dex.AsyncClient(
            self.registry,
            self._blob_cache,
            dex.ClientOptions(server_address=self._address, credential=self._credential),
        )
        loop = asyncio.get_running_loop()
        timeout = self.worker_tuning.registration_timeout.total_seconds()
        deadline = loop.time() + timeout
        delay = SERVER_RETRY_FIRST_SECONDS
        waiting = False
        try:
            while True:
                try:
                    await client.health_check()
                    return
                except dex.DexServiceError as error:
                    unavailable = error.code == grpc.StatusCode.UNAVAILABLE
                    if not unavailable or loop.time() + delay > deadline:
                        refused = self._refusal(error, "Client" if self.runs_client else "Worker")
                        if refused is not None:
                            raise refused from None
                        waited = f" within {timeout:g} s" if unavailable else ""
                        raise ConnectionError(
                            f"no Dex server answers at {self._address}{waited}: {error}"
                        ) from None
                    if not waiting:
                        waiting = True
                        _LOG.info(
                            "waiting up to %g s for the Dex server at %s to answer (%s)",
                            timeout,
                            self._address,
                            error,
                        )
                await asyncio.sleep(delay)
                delay = min(delay * 2, SERVER_RETRY_MAX_SECONDS)
        finally:
            if client is not self._client:
                await client.close()

    async def _start_engine(self) -> str:
        if self._requested_address is not None:
            return self._requested_address
        if self.database != ":memory:":
            Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        # Imported here: a host with a Dex server never loads the engine.
        from dex_local_engine import EngineServer, LocalEngine

        options = self.engine_options
        placement = options.placement
        in_process = self.engine_options.transport == "in-process" and route_in_process_channels()
        if placement == "loop":
            server = EngineServer(
                self.database,
                "127.0.0.1",
                0,
                options.durability,
                in_process=in_process,
                closed_flow_retention=options.closed_session_retention,
            )
            address = await server.start()
            self._engine_server = server
        else:
            engine = LocalEngine(
                database=self.database,
                port=0,
                durability=options.durability,
                in_process=in_process,
                closed_flow_retention=options.closed_session_retention,
            )
            await asyncio.to_thread(engine.start)
            self._engine = engine
            address = engine.address
        _LOG.info(
            "embedded dex-local-engine on %s (%s, %s), database %s",
            address,
            "the host's event loop" if placement == "loop" else "its own thread",
            "in-process calls" if in_process else "gRPC calls",
            self.database,
        )
        return address

    def _open_blob_cache(self) -> dex.BlobCache:
        directory = self._blob_cache_directory
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="dex-agents-blob-cache-"))
            self._owned_cache_directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        return dex.open_blob_cache(dex.BlobCacheConfig(str(directory), BLOB_CACHE_BYTES))

    async def start_worker(self) -> None:
        """Start the pull Worker (``start()`` does unless ``worker=False``); wait until it
        registered every queue."""
        if self._worker is not None:
            raise RuntimeError("the host's Worker is already running")
        if self._blob_cache is None or self._address is None:
            raise RuntimeError("start the host before its Worker")
        patches = self.sdk_patches
        if patches.memoize_sdk_version and memoize_sdk_version():
            _LOG.debug("the dex SDK's version lookup is memoized (SdkPatches.memoize_sdk_version)")
        if patches.quiet_reconnect_logs and quiet_pull_worker_logs():
            _LOG.debug("lost connections log once (SdkPatches.quiet_reconnect_logs)")
        if patches.keep_pull_streams and keep_finished_pull_streams():
            _LOG.debug("finished pull streams stay open as spares (SdkPatches.keep_pull_streams)")
        tuning = self.worker_tuning
        drain = tuning.drain_timeout or WAIT_FOREVER
        if track_running_pull_tasks():
            drain += DRAIN_CANCEL_GRACE  # the host cancels at drain_timeout, naming them
        worker = dex.AsyncWorker(
            self.registry,
            self._blob_cache,
            dex.WorkerOptions(
                server_address=self._address,
                credential=self._credential,
                pull=dex.PullWorkerOptions(
                    max_concurrent_tasks=tuning.max_concurrent_tasks,
                    idle_streams_per_queue=IDLE_STREAMS_PER_QUEUE,
                    stop_drain_timeout=drain,
                ),
            ),
        )
        self._worker = worker
        self._serving = asyncio.create_task(worker.start(), name="dex-agents-host-worker")
        timeout = tuning.registration_timeout.total_seconds()
        _LOG.info(
            "Worker registering with %s (waits up to %g s; a loaded server can take a while)",
            self._address,
            timeout,
        )
        registered = asyncio.create_task(worker.wait_pull_registered(timeout=timeout))
        done, _ = await asyncio.wait(
            {registered, self._serving}, return_when=asyncio.FIRST_COMPLETED
        )
        if registered not in done:  # the Worker stopped before it registered
            registered.cancel()
            await asyncio.gather(registered, return_exceptions=True)  # retrieve its error too
            serving, self._worker, self._serving = self._serving, None, None
            try:
                await serving
            except Exception as failure:
                refused = self._refusal(failure, "Worker")
                if refused is not None:
                    raise refused from None
                raise
            raise RuntimeError(f"the Worker stopped before it registered with {self._address}")
        try:
            registered.result()
        except TimeoutError:
            raise TimeoutError(
                f"the Worker did not register with the Dex server at {self._address}"
                f" within {timeout:g} s"
            ) from None
        _LOG.info("Worker registered (%d task slots)", tuning.max_concurrent_tasks)

    async def stop_worker(self) -> None:
        """Drain and stop the Worker, if one runs: it takes no new task, the running ones
        get ``worker_tuning.drain_timeout`` to finish, and the rest are cancelled and
        named in ``abandoned_steps`` (and a WARNING)."""
        worker, serving = self._worker, self._serving
        if worker is None:
            if self._worker_stopped is not None:  # another stop() drains it: wait for that
                await asyncio.shield(self._worker_stopped)
            return
        self._worker = self._serving = None
        stopped = self._worker_stopped = asyncio.get_running_loop().create_future()
        self._draining = True
        try:
            stopping = asyncio.create_task(worker.stop())
            await asyncio.sleep(0)  # the Worker stops taking tasks before they are read
            self.abandoned_steps = await _drain(running_pull_tasks(worker), self.worker_tuning)
            try:
                await stopping
            except Exception:
                _LOG.exception("the Worker did not stop cleanly")
        finally:
            self._draining = False
            self._worker_stopped = None
            stopped.set_result(None)
        if serving is not None:
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await serving
                except Exception:
                    _LOG.exception("the Worker ended with an error")

    async def stop(self) -> None:
        """Stop the Worker (it drains), close the Client and cache, stop the engine."""
        if self._stop_requested is not None:
            self._stop_requested.set()
        self._ready = False
        await self.stop_worker()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        cache, self._blob_cache = self._blob_cache, None
        if cache is not None:
            cache.close()
        if self._owned_cache_directory is not None:
            shutil.rmtree(self._owned_cache_directory, ignore_errors=True)
            self._owned_cache_directory = None
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.to_thread(engine.stop)
        server, self._engine_server = self._engine_server, None
        if server is not None:
            await server.stop()
        self._address = None
        probes, self._probes = self._probes, None
        if probes is not None:
            await probes.stop()

    async def serve(self) -> None:
        """Start (when not running) and serve until SIGTERM, SIGINT or ``stop()``; then stop.

        For Worker-only processes: ``asyncio.run(AgentHost(flows, client=False).serve())``.
        The stop drains the Worker for ``worker_tuning.drain_timeout``; when Steps were
        still running then, ``serve()`` raises ``StepsAbandoned`` after stopping, so the
        process exits with status 75. A second SIGTERM or SIGINT during the drain ends
        the process at once (the signal's default action).
        """
        install_default_logging()
        _LOG.info(
            "AgentHost serving Flow types %s (pid %d: %s); SIGTERM or SIGINT stops it, "
            "draining running Steps for %s",
            ", ".join(flow.get_flow_type() for flow in self.flows),
            os.getpid(),
            "Worker and Client"
            if self.runs_worker and self.runs_client
            else ("Worker only" if self.runs_worker else "Client only"),
            _limit(self.worker_tuning.drain_timeout),
        )
        if self._blob_cache is None:
            await self.start()
        stop_requested = self._stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        handled: list[signal.Signals] = []
        for signal_number in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal_number, stop_requested.set)
                handled.append(signal_number)
        try:
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop_requested.wait())}
            if self._serving is not None:
                waits.add(self._serving)
            done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                if task is not self._serving:
                    task.cancel()
            if self._serving is not None and self._serving in done:
                await self._serving  # the Worker stopped on its own: surface its error
        finally:
            for signal_number in handled:
                loop.remove_signal_handler(signal_number)
            self._stop_requested = None
            _LOG.info("AgentHost stopping")
            await self.stop()
        if self.abandoned_steps:
            _LOG.warning(
                "AgentHost stopped, Steps abandoned: %d; exiting with status %d",
                len(self.abandoned_steps),
                StepsAbandoned.EXIT_STATUS,
            )
            raise StepsAbandoned(self.abandoned_steps)
        _LOG.info("AgentHost stopped")

    async def __aenter__(self) -> AgentHost:
        await self.start()
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- sync use --------------------------------------------------------------------

    def __enter__(self) -> AgentHost:
        """Run the host on a background event loop thread; see ``call``."""
        if self._thread is not None:
            raise RuntimeError("the host already runs on a background loop")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="dex-agents-host", daemon=True)
        thread.start()
        self._thread_loop, self._thread = loop, thread
        try:
            self.call(self.start())
        except BaseException:
            self._stop_thread()
            raise
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.call(self.stop())
        finally:
            self._stop_thread()

    def call(self, awaitable: Awaitable[_T]) -> _T:
        """Run ``awaitable`` on the host's background loop and return its result (sync use).

        ``with AgentHost(flow) as host: host.call(host.client().start_session(...))``.
        """
        loop = self._thread_loop
        if loop is None:
            raise RuntimeError("call() is for `with AgentHost(...)`; in async code, await instead")
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop).result()

    def _stop_thread(self) -> None:
        loop, thread = self._thread_loop, self._thread
        self._thread_loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


_OptionT = TypeVar("_OptionT", EmbeddedEngineOptions, WorkerTuning, SdkPatches)


def _option(value: _OptionT | None, kind: type[_OptionT], name: str) -> _OptionT:
    """``value``, or ``kind()`` for None; a value of another type raises ``TypeError``."""
    if value is None:
        return kind()
    if not isinstance(value, kind):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{name} must be a {kind.__name__} or None, got {type(value).__name__}")
    return value


async def _drain(running: list[RunningPullTask] | None, tuning: WorkerTuning) -> tuple[str, ...]:
    """Wait up to ``tuning.drain_timeout`` for ``running``; cancel and name what is left.

    ``None`` (the SDK release has no task tracking) leaves the deadline to the SDK.
    """
    timeout = tuning.drain_timeout
    limit = _limit(timeout)
    if running is None:
        _LOG.info("Worker draining (%s; this SDK release does not say what runs)", limit)
        return ()
    if not running:
        _LOG.info("Worker draining: no Step running")
        return ()
    _LOG.info(
        "Worker draining: waiting %s for %d running: %s",
        limit,
        len(running),
        "; ".join(task.description for task in running),
    )
    _, pending = await asyncio.wait(
        {task.handler for task in running},
        timeout=None if timeout is None else timeout.total_seconds(),
    )
    left = [task for task in running if task.handler in pending]
    if not left:
        _LOG.info("Worker drained: every running Step finished")
        return ()
    assert timeout is not None
    _LOG.warning(
        "drain_timeout (%g s) expired with %d still running; abandoning them (the engine "
        "runs each again on another Worker; a tool call that was running becomes "
        "outcome_unknown unless its effect allows a rerun): %s",
        timeout.total_seconds(),
        len(left),
        "; ".join(task.description for task in left),
    )
    for task in left:
        task.cancel()
    await asyncio.gather(*(task.handler for task in left), return_exceptions=True)
    return tuple(task.description for task in left)


def _limit(timeout: timedelta | None) -> str:
    return "no deadline" if timeout is None else f"up to {timeout.total_seconds():g} s"


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The format of the stderr handler ``serve()`` installs when nothing configured logging."""


def install_default_logging() -> bool:
    """Log to stderr when the application configured no logging: ``dex_agents`` at INFO,
    everything else at WARNING. True when installed; an application's own handlers
    (on the root logger) or levels are left alone."""
    root = logging.getLogger()
    if root.handlers:
        return False
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=LOG_FORMAT)
    package = logging.getLogger("dex_agents")
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
    return True


def _warn_attribute(old: str, new: str) -> None:
    warnings.warn(
        f"AgentHost.{old} is deprecated: use AgentHost.{new}; it goes away in the next release",
        DeprecationWarning,
        stacklevel=3,
    )


async def _as_coroutine(awaitable: Awaitable[_T]) -> _T:
    return await awaitable
