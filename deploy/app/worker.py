"""A Worker-only process: runs the sessions' Steps until SIGTERM, then drains.

Run one per CPU or more (``python worker.py``), each on its own health port. The host
reads ``DEX_SERVER_ADDRESS`` and ``DEX_SERVER_TOKEN``; this script reads
``WORKER_HEALTH_PORT`` (HTTP ``/livez`` and ``/readyz``; unset: no probes),
``WORKER_HEALTH_HOST`` (default 127.0.0.1) and ``WORKER_DRAIN_SECONDS`` (default 30).
It exits 0 after a clean drain and 75 when Steps were still running at the deadline.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from orders_agent import flow

from dex_agents import AgentHost, HealthProbes, WorkerTuning


def main() -> None:
    port = os.environ.get("WORKER_HEALTH_PORT")
    health = (
        HealthProbes(port=int(port), host=os.environ.get("WORKER_HEALTH_HOST", "127.0.0.1"))
        if port
        else None
    )
    drain = timedelta(seconds=float(os.environ.get("WORKER_DRAIN_SECONDS", "30")))
    host = AgentHost(
        flow, client=False, health=health, worker_tuning=WorkerTuning(drain_timeout=drain)
    )
    asyncio.run(host.serve())


if __name__ == "__main__":
    main()
