"""The tuning of ``AgentHost``, grouped: the embedded engine, the Worker, the SDK patches.

Each group is a frozen dataclass that checks its fields when built, so a bad value
fails where it is written. The defaults are what a host uses without them.
``AgentHost``'s older keywords for the same settings (``embedded_engine=``,
``max_concurrent_tasks=``, ``memoize_sdk_version=``, ...) still work for one release,
with a ``DeprecationWarning``; ``options_from_keywords`` maps them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal, TypedDict, get_args

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_MAX_CONCURRENT_TASKS",
    "DEFAULT_REGISTRATION_TIMEOUT",
    "DeprecatedHostKeywords",
    "EmbeddedEngine",
    "EmbeddedEngineOptions",
    "EmbeddedTransport",
    "EngineDurability",
    "HealthProbes",
    "SdkPatches",
    "WorkerTuning",
    "options_from_keywords",
]

EmbeddedEngine = Literal["loop", "thread"]
"""Where the embedded engine runs: on the host's event loop, or on a thread of its own."""
EmbeddedTransport = Literal["in-process", "grpc"]
"""How the host's Client and Worker reach the embedded engine: directly, or by gRPC."""
EngineDurability = Literal["process-crash", "power-loss"]
"""When the embedded engine's commits reach the disk (``dex_local_engine.Durability``)."""

DEFAULT_MAX_CONCURRENT_TASKS = 16
"""Task slots of the host's Worker. Dex's default is one per CPU less one kept for
RPCs, so on a 2-core machine the tool calls of one model response ran one after
another; session handlers are async, so many slots cost little."""
DEFAULT_REGISTRATION_TIMEOUT = timedelta(seconds=60)
"""How long ``start()`` waits for the Worker to register its queues."""
DEFAULT_DRAIN_TIMEOUT = timedelta(seconds=30)
"""How long ``stop()`` lets the Worker's running Steps finish (the SDK's own default)."""


def check_choice(value: object, choices: tuple[str, ...], name: str) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


def check_task_slots(value: object, name: str) -> None:
    """Raise unless ``value`` is an int of at least 2 (the Worker keeps one for RPCs)."""
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 2:
        raise ValueError(f"{name} must be at least 2 (one is kept for RPCs)")


def check_flag(value: object, name: str) -> None:
    """Raise ``TypeError`` naming ``name`` unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


@dataclass(frozen=True, kw_only=True)
class EmbeddedEngineOptions:
    """Where the embedded engine runs and how the host reaches it.

    Used only when the host starts the local engine itself, that is without a
    ``server_address`` and without ``DEX_SERVER_ADDRESS``; a Dex server runs where
    its operator put it.
    """

    placement: EmbeddedEngine = "loop"
    """``"loop"`` serves the engine on the host's own event loop, beside the Worker and
    the Client; ``"thread"`` runs it on a background thread with a loop of its own.
    gRPC's asyncio stack delivers every completion through the loop that first used
    it, so with two loops each of the engine's events crosses threads twice and the
    two threads take turns at the GIL; one loop costs less CPU per turn. Choose
    ``"thread"`` when async Step handlers block the loop for long stretches, as the
    engine then waits with them."""

    transport: EmbeddedTransport = "in-process"
    """``"in-process"`` hands the calls of the host's own Client and Worker straight to
    the engine's gRPC handlers (``dex_local_engine.in_process``: no sockets; gRPC's
    statuses, limits, deadlines and cancellation kept; with ``placement="thread"`` each
    call hops onto the engine's loop); ``"grpc"`` uses loopback gRPC. The engine listens
    on its gRPC port either way, for other processes and the sync ``dex.Client``. The
    in-process route is a version-gated SDK patch: with another dex-python-sdk release
    the host logs why and uses gRPC."""

    durability: EngineDurability = "process-crash"
    """When a commit reaches the disk: ``"process-crash"`` (SQLite ``synchronous=NORMAL``
    in WAL mode: a committed Step survives the process crashing, not a power loss) or
    ``"power-loss"`` (``synchronous=FULL``: an fsync per commit). A separate engine takes
    it as ``dex-local-engine serve --durability``."""

    closed_session_retention: timedelta | None = None
    """Delete sessions that closed (completed, failed, cancelled or terminated) longer
    ago than this, with their messages, events and history: at start, then every tenth
    of the period (1 s to 10 min). ``None`` keeps them until their ID starts again. A
    separate engine takes it as ``dex-local-engine serve --closed-flow-retention``; Dex
    Server applies its namespace's own retention."""

    def __post_init__(self) -> None:
        check_choice(self.placement, get_args(EmbeddedEngine), "EmbeddedEngineOptions.placement")
        check_choice(self.transport, get_args(EmbeddedTransport), "EmbeddedEngineOptions.transport")
        check_choice(
            self.durability, get_args(EngineDurability), "EmbeddedEngineOptions.durability"
        )
        retention = self.closed_session_retention
        if retention is not None and (
            not isinstance(retention, timedelta) or retention < timedelta(0)  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(
                "EmbeddedEngineOptions.closed_session_retention must be a timedelta of at "
                f"least 0 or None, not {retention!r}"
            )


@dataclass(frozen=True, kw_only=True)
class WorkerTuning:
    """How the host's pull Worker runs; used only when the host runs one (``worker=True``)."""

    max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS
    """Task slots of the Worker, at least 2: one is kept for RPCs. Dex's own default is
    one per CPU less one, which on a 2-core machine runs the tool calls of one model
    response one after another; session handlers are async, so many slots cost little."""

    registration_timeout: timedelta = DEFAULT_REGISTRATION_TIMEOUT
    """How long ``start()`` waits for the Worker to register every queue with the
    server before it raises ``TimeoutError``."""

    drain_timeout: timedelta | None = DEFAULT_DRAIN_TIMEOUT
    """How long ``stop()`` (SIGTERM or SIGINT under ``serve()``) lets the Steps that run
    finish, after the Worker stopped taking new ones; ``None`` waits for every one. When
    it expires the host logs a WARNING naming each Step still running, cancels them
    (the engine runs each again, on another Worker, as after a crash: a tool call that
    was running becomes ``outcome_unknown`` unless its effect allows a rerun) and
    ``serve()`` exits with ``StepsAbandoned`` (status 75). Give it more than your
    longest tool call; an orchestrator's stop grace period (systemd ``TimeoutStopSec``,
    Kubernetes ``terminationGracePeriodSeconds``) must be longer still."""

    def __post_init__(self) -> None:
        check_task_slots(self.max_concurrent_tasks, "WorkerTuning.max_concurrent_tasks")
        timeout = self.registration_timeout
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                f"WorkerTuning.registration_timeout must be a positive timedelta, not {timeout!r}"
            )
        drain = self.drain_timeout
        if drain is not None and (
            not isinstance(drain, timedelta) or drain <= timedelta(0)  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(
                "WorkerTuning.drain_timeout must be a positive timedelta or None (wait for "
                f"every running Step), not {drain!r}"
            )


@dataclass(frozen=True, kw_only=True)
class HealthProbes:
    """HTTP probes an orchestrator can poll: ``GET /livez`` and ``GET /readyz``.

    ``AgentHost(health=HealthProbes(port=8081))`` serves them from ``start()`` to the end
    of ``stop()``. ``/livez`` answers ``200 ok`` while the process's event loop runs and
    its Worker has not died; ``/readyz`` answers ``200 ok`` once the Worker registered
    every queue (and the Client reached the server), and ``503`` with the reason while
    starting, draining or stopped. ``dex-local-engine serve --health-port`` serves the
    same two paths for the engine.
    """

    port: int
    """TCP port, 0-65535; 0 picks a free one (``AgentHost.health_address`` tells it)."""

    host: str = "127.0.0.1"
    """Address to listen on: loopback by default; ``0.0.0.0`` for a container's probes."""

    def __post_init__(self) -> None:
        if type(self.port) is not int or not 0 <= self.port <= 65535:
            raise ValueError(f"HealthProbes.port must be an int in 0-65535, not {self.port!r}")
        if not isinstance(self.host, str) or not self.host.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"HealthProbes.host must be a non-empty str, not {self.host!r}")


@dataclass(frozen=True, kw_only=True)
class SdkPatches:
    """The patches of dex-python-sdk the host applies before its Worker starts.

    Each patch is written for one SDK release (``dex_agents._sdk_patches``), applies
    process-wide and once, logs when it applied, and leaves any other release alone,
    saying so in the log. ``False`` runs that part of the SDK unpatched.
    """

    memoize_sdk_version: bool = True
    """Look the SDK's own version up once per process: dex-python-sdk 1.23.0 reads its
    package metadata each time a pull stream registers, about once per Step (27 % of
    a pull Worker's busy time, measured)."""

    keep_pull_streams: bool = True
    """Let a pull stream that finished a task stay open as a spare (at most 2 beyond the
    idle ones per queue): the 1.23.0 pull Worker opens, registers and retires one stream
    per Step or RPC, about 5.5 per turn; with the patch a turn opens about one."""

    quiet_reconnect_logs: bool = True
    """Log a lost server connection (a restart, a network drop) as one WARNING naming
    its cause and one INFO line once a stream registers again: the 1.23.0 pull Worker
    logs a multi-line WARNING per stream per reconnect attempt and an ERROR traceback
    per running task whose final frame found its stream gone. Other SDK logs pass
    unchanged."""

    def __post_init__(self) -> None:
        check_flag(self.memoize_sdk_version, "SdkPatches.memoize_sdk_version")
        check_flag(self.keep_pull_streams, "SdkPatches.keep_pull_streams")
        check_flag(self.quiet_reconnect_logs, "SdkPatches.quiet_reconnect_logs")


class DeprecatedHostKeywords(TypedDict, total=False):
    """``AgentHost``'s older tuning keywords; each still works for one release, with a
    ``DeprecationWarning`` that names the option field to use instead."""

    max_concurrent_tasks: int
    registration_timeout: timedelta
    memoize_sdk_version: bool
    keep_pull_streams: bool
    embedded_engine: EmbeddedEngine
    embedded_transport: EmbeddedTransport


_MOVED_KEYWORDS = {
    "embedded_engine": ("engine_options", "EmbeddedEngineOptions", "placement"),
    "embedded_transport": ("engine_options", "EmbeddedEngineOptions", "transport"),
    "max_concurrent_tasks": ("worker_tuning", "WorkerTuning", "max_concurrent_tasks"),
    "registration_timeout": ("worker_tuning", "WorkerTuning", "registration_timeout"),
    "memoize_sdk_version": ("sdk_patches", "SdkPatches", "memoize_sdk_version"),
    "keep_pull_streams": ("sdk_patches", "SdkPatches", "keep_pull_streams"),
}


def options_from_keywords(
    keywords: DeprecatedHostKeywords,
    engine_options: EmbeddedEngineOptions,
    worker_tuning: WorkerTuning,
    sdk_patches: SdkPatches,
) -> tuple[EmbeddedEngineOptions, WorkerTuning, SdkPatches]:
    """The three option groups with the deprecated ``keywords`` applied, warning for each.

    A bad value raises the error the keyword always raised, naming the keyword; an
    unknown keyword raises ``TypeError`` as a misspelled argument would.
    """
    groups: dict[str, dict[str, object]] = {
        "engine_options": {},
        "worker_tuning": {},
        "sdk_patches": {},
    }
    for keyword, value in keywords.items():
        moved = _MOVED_KEYWORDS.get(keyword)
        if moved is None:
            raise TypeError(f"AgentHost() got an unexpected keyword argument {keyword!r}")
        argument, group, field = moved
        warnings.warn(
            f"AgentHost({keyword}=...) is deprecated: use {argument}={group}({field}=...);"
            " the keyword goes away in the next release",
            DeprecationWarning,
            stacklevel=3,
        )
        _check_keyword(keyword, value)
        groups[argument][field] = value
    return (
        replace(engine_options, **groups["engine_options"]),  # pyright: ignore[reportArgumentType]
        replace(worker_tuning, **groups["worker_tuning"]),  # pyright: ignore[reportArgumentType]
        replace(sdk_patches, **groups["sdk_patches"]),  # pyright: ignore[reportArgumentType]
    )


def _check_keyword(keyword: str, value: object) -> None:
    """The checks the old keywords made, with their messages."""
    if keyword == "embedded_engine":
        check_choice(value, get_args(EmbeddedEngine), keyword)
    elif keyword == "embedded_transport":
        check_choice(value, get_args(EmbeddedTransport), keyword)
    elif keyword == "max_concurrent_tasks":
        check_task_slots(value, keyword)
    elif keyword in ("memoize_sdk_version", "keep_pull_streams"):
        check_flag(value, keyword)
