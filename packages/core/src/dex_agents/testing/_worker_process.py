"""Session Workers in child processes that tests can SIGKILL and start again.

``run_agent_worker_process`` is the body of the child: it serves the given
Flows with a pull-mode ``AsyncWorker`` until SIGTERM or SIGINT. The child must
build the same Flows as the test, so they come from an importable factory.
``python -m dex_agents.testing.worker_main module:factory`` runs a factory
that takes no arguments and returns one Flow or a list of them.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import dex

from dex_agents._host import SERVER_ADDRESS_VARIABLE, AgentHost
from dex_agents._host_options import DEFAULT_REGISTRATION_TIMEOUT, WorkerTuning
from dex_agents.testing._processes import ChildProcess

TEST_WORKER_MAX_CONCURRENT_TASKS = 8
"""Task slots of a test Worker (a child's and ``AgentTestEnvironment``'s in-process one),
one kept for RPCs, as the contract's testing export runs them. ``AgentHost`` itself
defaults to 16."""
WORKER_READY_LINE = "dex-agents test Worker ready"
"""The line a Worker child prints once it registered; the parent waits for it."""
SESSION_CODECS_VARIABLE = "DEX_AGENTS_TEST_SESSION_CODECS"
"""Set to ``0`` for a Worker child that decodes with Dex's default codecs instead of
``session_codec_registry()`` (the default, as in ``AgentHost``)."""


def load_object(import_path: str) -> object:
    """Import ``package.module:attribute`` (the attribute may be dotted)."""
    module_name, separator, attribute_path = import_path.partition(":")
    if not separator or not module_name or not attribute_path:
        raise ValueError(f"expected 'module:attribute', got {import_path!r}")
    value: object = importlib.import_module(module_name)
    for part in attribute_path.split("."):
        value = getattr(value, part)
    return value


def load_flows(factory_path: str) -> list[dex.Flow[Any]]:
    """Call the zero-argument factory at ``factory_path``; it returns a Flow or a list."""
    factory = load_object(factory_path)
    if not callable(factory):
        raise TypeError(f"{factory_path} is not callable")
    built = cast(Callable[[], object], factory)()
    flows = cast(list[object], built) if isinstance(built, list | tuple) else [built]
    for flow in flows:
        if not isinstance(flow, dex.Flow):
            raise TypeError(f"{factory_path} returned {type(flow).__name__}, not a dex.Flow")
    return cast(list[dex.Flow[Any]], flows)


async def serve_until_signalled(
    flows: Sequence[dex.Flow[Any]],
    server_address: str,
    *,
    max_concurrent_tasks: int = TEST_WORKER_MAX_CONCURRENT_TASKS,
    registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    session_codecs: bool = True,
) -> None:
    """Serve ``flows`` with a Worker-only ``AgentHost`` until SIGTERM or SIGINT, then drain."""
    host = AgentHost(
        flows,
        server_address=server_address,
        client=False,
        session_codecs=session_codecs,
        worker_tuning=WorkerTuning(
            max_concurrent_tasks=max_concurrent_tasks, registration_timeout=registration_timeout
        ),
    )
    await host.start()
    print(WORKER_READY_LINE, flush=True)  # the parent test waits for this line
    await host.serve()


def run_agent_worker_process(
    flows: Sequence[dex.Flow[Any]],
    *,
    server_address: str | None = None,
    max_concurrent_tasks: int = TEST_WORKER_MAX_CONCURRENT_TASKS,
) -> None:
    """Body of a Worker child process: serve ``flows`` until terminated, with
    ``max_concurrent_tasks`` task slots (8 by default).

    The server address comes from ``server_address`` or ``DEX_SERVER_ADDRESS``.
    It decodes with ``session_codec_registry()``; ``DEX_AGENTS_TEST_SESSION_CODECS=0``
    uses Dex's default codecs instead.
    Prints ``dex-agents test Worker ready`` once every pull queue registered.
    """
    if not flows:
        raise ValueError("run_agent_worker_process needs at least one Flow")
    address = server_address or os.environ.get(SERVER_ADDRESS_VARIABLE)
    if not address:
        raise ValueError(f"pass server_address or set {SERVER_ADDRESS_VARIABLE}")
    asyncio.run(
        serve_until_signalled(
            flows,
            address,
            max_concurrent_tasks=max_concurrent_tasks,
            session_codecs=os.environ.get(SESSION_CODECS_VARIABLE) != "0",
        )
    )


class KillableWorkerProcess:
    """A Worker child in its own process group: ``kill()`` is SIGKILL, ``stop()`` drains."""

    def __init__(self, process: ChildProcess) -> None:
        self._process = process

    @classmethod
    def start(
        cls,
        *,
        server_address: str,
        log_path: Path | str,
        entry_module: str = "dex_agents.testing.worker_main",
        arguments: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
        ready_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT,
    ) -> KillableWorkerProcess:
        """Run ``python -m entry_module *arguments`` and wait for its ready line.

        The child gets ``DEX_SERVER_ADDRESS`` plus ``environment``. With the default
        entry module, ``arguments`` are factory import paths (``module:factory``).
        """
        env = {SERVER_ADDRESS_VARIABLE: server_address, **(environment or {})}
        command = [sys.executable, "-m", entry_module, *arguments]
        process = ChildProcess.spawn(command, log_path=Path(log_path), environment=env)
        try:
            process.wait_for_log_line(WORKER_READY_LINE, ready_timeout)
        except BaseException:
            process.kill()
            raise
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def log_path(self) -> Path:
        return self._process.log_path

    def is_running(self) -> bool:
        return self._process.is_running()

    def read_log(self) -> str:
        return self._process.read_log()

    def kill(self) -> None:
        """SIGKILL the Worker's whole process group, mid-Step if it is in one."""
        self._process.kill()

    def stop(self, grace: timedelta = timedelta(seconds=30)) -> int | None:
        """SIGTERM: the Worker drains its running tasks and exits; SIGKILL after ``grace``."""
        return self._process.terminate(grace)

    def __enter__(self) -> KillableWorkerProcess:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.is_running():
            self.kill()
