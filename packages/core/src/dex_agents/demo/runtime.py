"""The demo's Dex: a local engine (or a given Dex server), one pull AsyncWorker and a Client."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import TracebackType
from typing import Any

import dex

from dex_local_engine import LocalEngine

__all__ = ["EmbeddedDex"]

_BLOB_CACHE_BYTES = 64 * 1024 * 1024
_REGISTRATION_TIMEOUT_SECONDS = 30.0


class EmbeddedDex:
    """Runs ``flows`` on a local engine whose SQLite database is ``database``.

    With ``server_address`` it starts no engine and uses that Dex server instead
    (Dex Server, or a ``dex-local-engine serve``): the same Worker and Client code.
    Use as ``async with EmbeddedDex(...) as dex_runtime``; leaving stops the
    Worker, then the engine. Sessions stay in the database for the next start.
    """

    def __init__(
        self,
        database: Path,
        flows: list[dex.Flow[Any]],
        cache_directory: Path,
        *,
        server_address: str | None = None,
    ) -> None:
        self.database = database
        self.server_address = server_address
        self.flows = flows
        self.cache_directory = cache_directory
        self._engine: LocalEngine | None = None
        self._worker: dex.AsyncWorker | None = None
        self._serving: asyncio.Task[None] | None = None
        self._blob_cache: dex.BlobCache | None = None
        self._client: dex.AsyncClient | None = None

    @property
    def client(self) -> dex.AsyncClient:
        if self._client is None:
            raise RuntimeError("the embedded engine is not running")
        return self._client

    async def __aenter__(self) -> EmbeddedDex:
        self.cache_directory.mkdir(parents=True, exist_ok=True)
        address = self.server_address
        if address is None:
            self.database.parent.mkdir(parents=True, exist_ok=True)
            engine = LocalEngine(database=self.database, port=0)
            await asyncio.to_thread(engine.start)
            self._engine = engine
            address = engine.address
        try:
            self._blob_cache = dex.open_blob_cache(
                dex.BlobCacheConfig(str(self.cache_directory), _BLOB_CACHE_BYTES)
            )
            registry = dex.Registry(self.flows, allow_async_handlers=True)
            self._worker = dex.AsyncWorker(
                registry,
                self._blob_cache,
                dex.WorkerOptions(
                    server_address=address,
                    pull=dex.PullWorkerOptions(max_concurrent_tasks=4),
                ),
            )
            self._serving = asyncio.create_task(self._worker.start())
            await self._worker.wait_pull_registered(timeout=_REGISTRATION_TIMEOUT_SECONDS)
            self._client = dex.AsyncClient(
                registry,
                self._blob_cache,
                dex.ClientOptions(
                    server_address=address, worker_target=dex.WorkerTarget(pull=True)
                ),
            )
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._worker is not None:
            with contextlib.suppress(Exception):
                await self._worker.stop()
        if self._serving is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._serving, 30)
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
        if self._blob_cache is not None:
            self._blob_cache.close()
        if self._engine is not None:
            await asyncio.to_thread(self._engine.stop)
        self._worker = self._serving = self._client = self._blob_cache = self._engine = None
