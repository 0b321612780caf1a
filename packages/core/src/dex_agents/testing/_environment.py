"""``AgentTestEnvironment``: engine, Workers and Client for a session test, closed together.

It is an ``AgentHost`` on a ``PrivateDexEngine`` (a killable child process) or on
a given ``server_address``. With ``worker_in_process=True`` the host's Worker runs
on the test's event loop; SIGKILL tests start ``KillableWorkerProcess`` children
with ``start_worker_process`` instead. ``close()`` (or ``async with``) kills the
children, stops the host and stops an engine it started.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import dex

from dex_agents._host import AgentHost
from dex_agents._host_options import DEFAULT_REGISTRATION_TIMEOUT, WorkerTuning
from dex_agents.testing._engine import PrivateDexEngine
from dex_agents.testing._worker_process import (
    TEST_WORKER_MAX_CONCURRENT_TASKS,
    KillableWorkerProcess,
)


class AgentTestEnvironment:
    """Client, optional in-process Worker, Worker children and optionally an own engine.

    Use ``async with await AgentTestEnvironment.start(...)`` or call ``close()``.
    """

    def __init__(self, host: AgentHost, engine: PrivateDexEngine | None = None) -> None:
        self.host = host
        self.server_address = host.server_address
        self.engine = engine
        """The engine this environment started, or ``None`` when given an address."""
        self.flows = host.flows
        self.client = host.dex_client
        self._worker_processes: list[KillableWorkerProcess] = []

    @classmethod
    async def start(
        cls,
        *,
        flows: Sequence[dex.Flow[Any]],
        server_address: str | None = None,
        worker_in_process: bool = False,
        max_concurrent_tasks: int = TEST_WORKER_MAX_CONCURRENT_TASKS,
        registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    ) -> AgentTestEnvironment:
        """Start the host (and an engine, without ``server_address``); the in-process
        Worker has ``max_concurrent_tasks`` task slots, 8 by default."""
        if not flows:
            raise ValueError("AgentTestEnvironment needs at least one Flow")
        engine = PrivateDexEngine.start() if server_address is None else None
        host = AgentHost(
            flows,
            server_address=engine.server_address if engine is not None else server_address,
            worker=worker_in_process,
            worker_tuning=WorkerTuning(
                max_concurrent_tasks=max_concurrent_tasks,
                registration_timeout=registration_timeout,
            ),
        )
        try:
            await host.start()
        except BaseException:
            if engine is not None:
                engine.close()
            raise
        return cls(host, engine)

    @property
    def has_worker(self) -> bool:
        return self.host.worker is not None

    async def start_worker(self) -> None:
        """Start the in-process pull Worker for the Flows; return once it registered."""
        await self.host.start_worker()

    async def stop_worker(self) -> None:
        """Drain and stop the in-process Worker, if one runs."""
        await self.host.stop_worker()

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
        await self.host.stop()
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
