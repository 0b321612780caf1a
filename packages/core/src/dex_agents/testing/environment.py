"""``AgentTestEnvironment``: engine, Workers and Client for a session test, closed together.

The Client starts Flows for pull Workers, as session Workers run. Without a
``server_address`` the environment starts its own ``PrivateDexEngine``. With
``worker_in_process=True`` it runs an ``AsyncWorker`` on the test's event loop;
SIGKILL tests start ``KillableWorkerProcess`` children with
``start_worker_process`` instead. ``close()`` (or ``async with``) stops the
Worker, kills the children and stops an engine it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import dex

from dex_agents.testing.engine import PrivateDexEngine
from dex_agents.testing.worker_process import (
    BLOB_CACHE_BYTES,
    DEFAULT_MAX_CONCURRENT_TASKS,
    DEFAULT_REGISTRATION_TIMEOUT,
    KillableWorkerProcess,
    build_pull_worker,
)


class AgentTestEnvironment:
    """Client, optional in-process Worker, Worker children and optionally an own engine.

    Use ``async with await AgentTestEnvironment.start(...)`` or call ``close()``.
    """

    def __init__(
        self,
        *,
        server_address: str,
        flows: Sequence[dex.Flow[Any]],
        cache_directory: Path,
        blob_cache: dex.BlobCache,
        client: dex.AsyncClient,
        engine: PrivateDexEngine | None = None,
    ) -> None:
        self.server_address = server_address
        self.engine = engine
        """The engine this environment started, or ``None`` when given an address."""
        self.flows = tuple(flows)
        self.client = client
        self._cache_directory = cache_directory
        self._blob_cache = blob_cache
        self._worker: dex.AsyncWorker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._worker_processes: list[KillableWorkerProcess] = []

    @classmethod
    async def start(
        cls,
        *,
        flows: Sequence[dex.Flow[Any]],
        server_address: str | None = None,
        worker_in_process: bool = False,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    ) -> AgentTestEnvironment:
        if not flows:
            raise ValueError("AgentTestEnvironment needs at least one Flow")
        engine = PrivateDexEngine.start() if server_address is None else None
        if engine is not None:
            server_address = engine.server_address
        assert server_address is not None
        cache_directory = Path(tempfile.mkdtemp(prefix="dex-agents-test-cache-"))
        blob_cache = dex.open_blob_cache(
            dex.BlobCacheConfig(str(cache_directory), BLOB_CACHE_BYTES)
        )
        client = dex.AsyncClient(
            dex.Registry(list(flows), allow_async_handlers=True),
            blob_cache,
            dex.ClientOptions(
                server_address=server_address, worker_target=dex.WorkerTarget(pull=True)
            ),
        )
        environment = cls(
            server_address=server_address,
            flows=flows,
            cache_directory=cache_directory,
            blob_cache=blob_cache,
            client=client,
            engine=engine,
        )
        if worker_in_process:
            try:
                await environment.start_worker(
                    max_concurrent_tasks=max_concurrent_tasks,
                    registration_timeout=registration_timeout,
                )
            except BaseException:
                await environment.close()
                raise
        return environment

    @property
    def has_worker(self) -> bool:
        return self._worker is not None

    async def start_worker(
        self,
        *,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    ) -> None:
        """Start an in-process pull Worker for the Flows; return once it registered."""
        if self._worker is not None:
            raise RuntimeError("the in-process Worker is already running")
        worker = build_pull_worker(
            self.flows,
            self.server_address,
            self._blob_cache,
            max_concurrent_tasks=max_concurrent_tasks,
        )
        self._worker = worker
        self._worker_task = asyncio.create_task(worker.start())
        await worker.wait_pull_registered(timeout=registration_timeout.total_seconds())

    async def stop_worker(self) -> None:
        """Drain and stop the in-process Worker, if one runs."""
        worker, task = self._worker, self._worker_task
        self._worker, self._worker_task = None, None
        if worker is None or task is None:
            return
        await worker.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def start_worker_process(
        self,
        *,
        log_path: Path | str,
        arguments: Sequence[str],
        entry_module: str = "dex_agents.testing.worker_main",
        environment: Mapping[str, str] | None = None,
    ) -> KillableWorkerProcess:
        """Start a Worker child on this environment's engine; ``close()`` kills it if alive.

        See ``KillableWorkerProcess.start`` for the arguments.
        """
        worker = KillableWorkerProcess.start(
            server_address=self.server_address,
            log_path=log_path,
            entry_module=entry_module,
            arguments=arguments,
            environment=environment,
        )
        self._worker_processes.append(worker)
        return worker

    def kill_worker_processes(self) -> None:
        """SIGKILL every Worker child started here that is still running."""
        for worker in self._worker_processes:
            if worker.is_running():
                worker.kill()

    async def close(self) -> None:
        self.kill_worker_processes()
        await self.stop_worker()
        await self.client.close()
        self._blob_cache.close()
        shutil.rmtree(self._cache_directory, ignore_errors=True)
        if self.engine is not None:
            self.engine.close()

    async def __aenter__(self) -> AgentTestEnvironment:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
