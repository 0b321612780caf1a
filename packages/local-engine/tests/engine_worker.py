"""A pull Worker child process: ``python engine_worker.py ADDRESS`` serves engine_app's Flows."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading

import engine_app
from dex import BlobCacheConfig, Registry, Worker, WorkerOptions, open_blob_cache
from dex.worker_options import PullWorkerOptions


def main() -> None:
    address = sys.argv[1]
    registry = Registry(engine_app.flows())
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
        worker = Worker(
            registry,
            cache,
            WorkerOptions(server_address=address, pull=PullWorkerOptions(max_concurrent_tasks=4)),
        )
        runner = threading.Thread(target=worker.start, daemon=True)
        runner.start()
        worker.wait_pull_registered(30)
        print("worker ready", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        stop.wait()
        worker.stop()
        runner.join()
        cache.close()


if __name__ == "__main__":
    main()
