"""``AgentTestEnvironment``: a Registry, a blob cache, a Client, and optionally a Worker.

The Client starts Flows for pull Workers, as session Workers run. With
``worker_in_process=True`` the environment also runs an ``AsyncWorker`` on the
test's event loop; SIGKILL tests instead run ``KillableWorkerProcess`` children.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import dex

from dex_agents.testing.worker_process import (
    BLOB_CACHE_BYTES,
    DEFAULT_MAX_CONCURRENT_TASKS,
    DEFAULT_REGISTRATION_TIMEOUT,
    build_pull_worker,
)


class AgentTestEnvironment:
    """Client (and optional in-process Worker) for ``flows`` on the engine at ``server_address``.

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
    ) -> None:
        self.server_address = server_address
        self.flows = tuple(flows)
        self.client = client
        self._cache_directory = cache_directory
        self._blob_cache = blob_cache
        self._worker: dex.AsyncWorker | None = None
        self._worker_task: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        *,
        server_address: str,
        flows: Sequence[dex.Flow[Any]],
        worker_in_process: bool = False,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    ) -> AgentTestEnvironment:
        if not flows:
            raise ValueError("AgentTestEnvironment needs at least one Flow")
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

    async def close(self) -> None:
        await self.stop_worker()
        await self.client.close()
        self._blob_cache.close()
        shutil.rmtree(self._cache_directory, ignore_errors=True)

    async def __aenter__(self) -> AgentTestEnvironment:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
