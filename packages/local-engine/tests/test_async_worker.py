"""AsyncClient and a pull AsyncWorker with async handlers against the engine."""

from __future__ import annotations

import asyncio

import async_app
from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    FlowStatus,
    Registry,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex.worker_options import PullWorkerOptions

from dex_local_engine import LocalEngine


async def test_async_worker_and_client(engine: LocalEngine, cache_dir: str) -> None:
    flows = async_app.flows()
    registry = Registry(flows, allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
    worker = AsyncWorker(
        registry,
        cache,
        WorkerOptions(
            server_address=engine.address, pull=PullWorkerOptions(max_concurrent_tasks=4)
        ),
    )
    running = asyncio.create_task(worker.start())
    try:
        await worker.wait_pull_registered(30)
        client = AsyncClient(
            registry,
            cache,
            ClientOptions(server_address=engine.address, worker_target=WorkerTarget(pull=True)),
        )
        await client.start_flow(flows[0], "async-1", "in")
        assert await client.invoke_rpc(flows[0].send, "async-1", "hello") == "HELLO"
        result = await client.wait_for_flow("async-1")
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "in:['hello']"
        note = await client.read_stream("async-1", flows[0].notes)
        assert note.value == "executing"
        assert note.source == "#AsyncWaiter-1"
    finally:
        await worker.stop()
        await asyncio.wait_for(running, 30)
        cache.close()
