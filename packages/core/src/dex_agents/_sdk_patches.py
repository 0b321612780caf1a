"""Every use of dex-python-sdk's private parts, in one module, behind one version gate.

dex-agents runs the unmodified SDK. Where the SDK lacks something the session needs,
this module patches or reads the SDK's internals, each for exactly the release it was
written for (``PATCHED_SDK_VERSION``, the release the core pins): another release is
left alone, and the log says why. The tests in ``packages/core/tests/test_sdk_patches.py``
check each one against the pinned SDK, so an SDK upgrade shows at once what to redo.

* :func:`memoize_sdk_version`: the SDK reads its own package metadata
  (``importlib.metadata.version``, which scans ``sys.path`` and parses a metadata
  file) every time a pull stream registers, about once per Step; the lookup
  measured 27 % of a pull Worker's busy time. The installed version cannot change
  while a process runs, so the patch computes it once (``functools.cache`` on
  ``dex._server_protocol.sdk_version``), the fix proposed upstream.
* :func:`keep_finished_pull_streams`: a pull Worker keeps ``idle_streams_per_queue``
  idle streams per queue, so a stream that takes a task gets an idle replacement at
  once and retires when the task is done: one stream opened, registered, drained and
  closed per Step or RPC (about 5.5 per session turn). The patch raises only the bar
  for retiring: a stream that just finished a task stays while fewer than ``spare``
  streams beyond the desired idle ones are idle. Creating streams is unchanged, so
  parallel Steps still find idle streams, and a turn opens about one stream.
* :func:`route_in_process_channels`: the SDK's async channels to an address that an
  in-process ``dex_local_engine.EngineServer`` registered become in-process channels
  (``dex_local_engine.in_process``), so the host's own Client and Worker reach the
  embedded engine without sockets.
* :func:`track_running_pull_tasks` and :func:`running_pull_tasks`: the task each busy
  pull stream runs, noted when the stream takes it, so that ``AgentHost``'s drain can
  name the Steps still running when ``WorkerTuning.drain_timeout`` expires and cancel
  them itself (the SDK's ``AsyncWorker`` says nothing about what it runs).
* :func:`quiet_pull_worker_logs`: when the server restarts or the network drops, the
  1.23.0 pull Worker logs a multi-line WARNING per stream per reconnect attempt
  ("Worker task stream disconnected: <AioRpcError ...>", about 100 per outage) and an
  ERROR traceback per running task whose final frame found its stream gone ("send
  Worker error frame failed ... RPC already finished"). A filter on the SDK's logger
  turns one outage into one WARNING naming its cause, counts the rest, and a wrapper
  of the registration record logs one INFO line when a stream registers again.
* :func:`step_context_metadata`: the protobuf Context of a Step method, which the SDK
  keeps as ``InvocationContext._metadata``; the session reads the attempt progress of
  a recovery error from it (``dex_agents._attempt_progress``), a field the SDK keeps
  as an unknown field and wraps nowhere.
* :func:`committed_attribute_string`: an Attribute's committed value as the Dex string
  it is stored as, from ``InvocationContext._attributes``; it reads session settings
  that earlier builds stored as JSON text (``dex_agents._session_settings``).

``AgentHost`` applies the patches (``SdkPatches``, ``EmbeddedEngineOptions.transport``);
each is process-wide and idempotent.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from dex.dexpb import dex_pb2 as pb

__all__ = [
    "KEPT_SPARE_STREAMS",
    "PATCHED_SDK_VERSION",
    "RunningPullTask",
    "committed_attribute_string",
    "keep_finished_pull_streams",
    "memoize_sdk_version",
    "quiet_pull_worker_logs",
    "route_in_process_channels",
    "running_pull_tasks",
    "step_context_metadata",
    "track_running_pull_tasks",
]

_LOG = logging.getLogger("dex_agents.sdk_patches")

PATCHED_SDK_VERSION = "1.23.0"
"""The dex-python-sdk release every patch here was written for, and checked against."""

KEPT_SPARE_STREAMS = 2
"""Idle streams a queue keeps beyond ``idle_streams_per_queue`` before one retires."""


def _written_for(installed: str, what: str) -> bool:
    """The version gate: True for ``PATCHED_SDK_VERSION``, else False, logging why."""
    if installed == PATCHED_SDK_VERSION:
        return True
    _LOG.warning(
        "not %s: written for dex-python-sdk %s, found %s", what, PATCHED_SDK_VERSION, installed
    )
    return False


# --- the SDK's version lookup ------------------------------------------------------------


def memoize_sdk_version() -> bool:
    """Make the SDK look its version up once per process; True when applied.

    Idempotent. Returns False (and logs why) for an SDK release other than
    ``PATCHED_SDK_VERSION`` or when the SDK's layout is not the expected one.
    """
    try:
        import dex._pull_worker as pull_worker
        import dex._server_protocol as server_protocol
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not memoizing the SDK version: %s", error)
        return False
    lookup = getattr(server_protocol, "sdk_version", None)
    if lookup is None or getattr(pull_worker, "sdk_version", None) is not lookup:
        if getattr(lookup, "cache_info", None) is not None:
            return True  # already applied
        _LOG.warning("not memoizing the SDK version: unexpected dex SDK layout")
        return False
    cached = functools.cache(lookup)
    # The gate reads the version through the cache: the lookup runs once either way.
    if not _written_for(cached(), "memoizing the SDK version"):
        return False
    server_protocol.sdk_version = cached
    cast(Any, pull_worker).sdk_version = cached
    return True


def _patch_target(
    module_name: str, type_name: str, method_name: str, marker: str, what: str
) -> tuple[Any, Any] | bool:
    """The class and the method a patch wraps; ``True`` when ``marker`` says it is
    applied already, ``False`` (logged) for another SDK release or layout."""
    try:
        import dex._server_protocol as server_protocol

        module = importlib.import_module(module_name)
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not %s: %s", what, error)
        return False
    owner: Any = getattr(module, type_name, None)
    method: Any = getattr(owner, method_name, None)
    if method is None:
        _LOG.warning("not %s: unexpected dex SDK layout", what)
        return False
    if getattr(owner, marker, False):
        return True
    if not _written_for(server_protocol.sdk_version(), what):
        return False
    return owner, method


# --- pull streams ------------------------------------------------------------------------

_RETIRING = "_dex_agents_retiring"
_KEEPS_STREAMS = "_dex_agents_keeps_streams"


def keep_finished_pull_streams(spare: int = KEPT_SPARE_STREAMS) -> bool:
    """Let a pull stream that finished a task stay open; True when applied.

    Process-wide and idempotent (the first ``spare`` stays). A queue then holds at most
    ``idle_streams_per_queue + spare`` idle streams, each an open long poll on the
    engine. Stopping, draining and reconnecting stay the SDK's own. Returns False, and
    logs why, for an SDK release other than ``PATCHED_SDK_VERSION`` or an unexpected
    SDK layout.
    """
    if type(spare) is not int or spare < 1:
        raise ValueError("spare must be a positive integer")
    try:
        import dex._pull_worker as pull_worker
        import dex._server_protocol as server_protocol
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not keeping pull streams: %s", error)
        return False
    runtime_type: Any = getattr(pull_worker, "PullWorkerRuntime", None)
    stream_type: Any = getattr(pull_worker, "PullStream", None)
    desired: Callable[[Any, str], int] | None = getattr(
        runtime_type, "desired_idle_streams_per_queue", None
    )
    retire: Callable[[Any], None] | None = getattr(stream_type, "try_retire", None)
    if desired is None or retire is None:
        _LOG.warning("not keeping pull streams: unexpected dex SDK layout")
        return False
    if getattr(stream_type, _KEEPS_STREAMS, False):
        return True
    if not _written_for(server_protocol.sdk_version(), "keeping pull streams"):
        return False
    original_desired = desired
    original_retire = retire

    def desired_idle_streams_per_queue(self: Any, queue: str) -> int:
        wanted = original_desired(self, queue)
        # Only the retirement check sees the spare streams; creation sees the SDK's count.
        return wanted + spare if getattr(self, _RETIRING, False) else wanted

    def try_retire(self: Any) -> None:
        runtime = self.runtime
        setattr(runtime, _RETIRING, True)
        try:
            original_retire(self)
        finally:
            setattr(runtime, _RETIRING, False)

    runtime_type.desired_idle_streams_per_queue = desired_idle_streams_per_queue
    stream_type.try_retire = try_retire
    setattr(stream_type, _KEEPS_STREAMS, True)
    return True


# --- in-process channels -----------------------------------------------------------------

_ROUTED = "_dex_local_engine_in_process"


def route_in_process_channels() -> bool:
    """Give SDK async channels to an in-process engine's address an in-process channel.

    Patches the channel factories of ``dex.async_client``, ``dex.async_worker`` and
    ``dex._pull_worker``: an address an ``EngineServer(in_process=True)`` registered
    gets a ``dex_local_engine.in_process.InProcessChannel`` (each call goes to the
    server registered for the address then, else over gRPC); every other address,
    and a Client with a credential (its credential interceptor needs gRPC), gets the
    SDK's own gRPC channel. The sync ``dex.Client`` is untouched. Process-wide and
    idempotent; True when applied, False (logged) for an SDK release other than
    ``PATCHED_SDK_VERSION`` or an unexpected SDK layout.
    """
    try:
        import dex._pull_worker as pull_worker
        import dex._server_protocol as server_protocol
        import dex.async_client as async_client
        import dex.async_worker as async_worker
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not routing channels in process: %s", error)
        return False
    modules: list[Any] = [async_client, async_worker]
    originals: list[Any] = [getattr(module, "async_channel", None) for module in modules]
    worker_channel: Any = getattr(pull_worker, "outbound_worker_task_channel", None)
    if any(getattr(found, _ROUTED, False) for found in [*originals, worker_channel]):
        return True
    if worker_channel is None or any(found is None for found in originals):
        _LOG.warning("not routing channels in process: unexpected dex SDK layout")
        return False
    if not _written_for(server_protocol.sdk_version(), "routing channels in process"):
        return False
    # The engine is imported only here: a host with a Dex server never loads it.
    from dex_local_engine.in_process import InProcessChannel, server_at

    def routed(original: Any) -> Any:
        def async_channel(server_address: str, credential_runner: Any) -> Any:
            if server_at(server_address) is None or credential_runner is not None:
                return original(server_address, credential_runner)
            return InProcessChannel(address=server_address)

        setattr(async_channel, _ROUTED, True)
        return async_channel

    def outbound_worker_task_channel(server_address: str) -> Any:
        if server_at(server_address) is None:
            return worker_channel(server_address)
        return InProcessChannel(address=server_address)

    setattr(outbound_worker_task_channel, _ROUTED, True)
    for module, original in zip(modules, originals, strict=True):
        module.async_channel = routed(original)
    cast(Any, pull_worker).outbound_worker_task_channel = outbound_worker_task_channel
    return True


# --- running tasks ---------------------------------------------------------------------

_TASK = "_dex_agents_task"
_TRACKS_TASKS = "_dex_agents_tracks_tasks"


@dataclass(frozen=True)
class RunningPullTask:
    """A task a pull stream of the Worker runs: what it is, its handler, how to cancel it."""

    description: str
    """``Step <flow type>/<step execution>.<method> of session <flow id> (attempt n)``,
    or ``RPC <name> of session <flow id>``."""
    handler: asyncio.Task[None]
    """The SDK's handler task; done once the task's last frame was sent."""
    cancel: Callable[[], None]
    """Cancel the handler as the SDK's own drain deadline does: the engine gets a
    CANCELLED error for the attempt and runs it again."""


def track_running_pull_tasks() -> bool:
    """Note on each pull stream the task it takes (read by ``running_pull_tasks``).

    Process-wide and idempotent; True when applied, False (logged) for an SDK release
    other than ``PATCHED_SDK_VERSION`` or an unexpected SDK layout.
    """
    target = _patch_target(
        "dex._pull_worker", "PullStream", "_start_task", _TRACKS_TASKS, "tracking running tasks"
    )
    if isinstance(target, bool):
        return target
    stream_type, original = target

    async def _start_task(self: Any, task: Any) -> None:
        setattr(self, _TASK, task)
        await original(self, task)

    stream_type._start_task = _start_task
    setattr(stream_type, _TRACKS_TASKS, True)
    return True


def running_pull_tasks(worker: object) -> list[RunningPullTask] | None:
    """The tasks ``worker`` (a pull ``dex.AsyncWorker``) runs now; ``None`` when they
    cannot be read (``track_running_pull_tasks`` not applied, or not a pull Worker)."""
    try:
        import dex._pull_worker as pull_worker
    except ImportError:
        return None
    if not getattr(getattr(pull_worker, "PullStream", None), _TRACKS_TASKS, False):
        return None
    runtime: Any = getattr(worker, "_pull", None)
    streams: Any = getattr(runtime, "_streams", None)
    if streams is None:
        return None
    running: list[RunningPullTask] = []
    for stream in tuple(streams):
        handler = getattr(stream, "handler_task", None)
        task = getattr(stream, _TASK, None)
        if handler is None or handler.done() or task is None:
            continue
        running.append(RunningPullTask(_describe(task), handler, stream.cancel_handler))
    return running


def _describe(task: Any) -> str:
    kind = task.WhichOneof("request")
    if kind == "rpc":
        return f"RPC {task.rpc.rpc_name} of session {task.rpc.context.flow_id}"
    request = task.execute if kind == "execute" else task.wait_for
    context = request.context
    return (
        f"Step {request.flow_type}/{context.step_execution_id}.{kind} of session "
        f"{context.flow_id} (attempt {context.attempt})"
    )


# --- reconnect logs ----------------------------------------------------------------------

_DISCONNECTED = "Worker task stream disconnected: %s"
_STREAM_GONE_MESSAGES = frozenset(
    {
        "send Worker error frame failed",
        "Python Worker invocation failed",
        "Worker task stream failed",
        "send Worker keepalive Pong failed",
    }
)
_QUIETED = "_dex_agents_quiet_logs"


class _ReconnectLogs(logging.Filter):
    """One WARNING per lost connection, one INFO once a stream registers again."""

    def __init__(self) -> None:
        super().__init__()
        self.cause: str | None = None
        self.disconnects = 0
        self.lost_frames = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _DISCONNECTED and record.args:
            args: Any = record.args
            return self._lost(record, _cause(args[0]), disconnect=True)
        if record.msg in _STREAM_GONE_MESSAGES and record.exc_info is not None:
            failure = record.exc_info[1]
            if _is_stream_gone(failure):
                return self._lost(record, "its stream ended", disconnect=False)
        return True

    def _lost(self, record: logging.LogRecord, cause: str, *, disconnect: bool) -> bool:
        if disconnect:
            self.disconnects += 1
        else:
            self.lost_frames += 1
        if self.cause is not None:
            return False
        self.cause = cause
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = (
            "Worker lost its task streams to the Dex server (%s); they reconnect on their "
            "own, and the server runs again any task that was running (more of these are "
            "counted, not logged, until a stream registers again)"
        )
        record.args = (cause,)
        record.exc_info = record.exc_text = None
        return True

    def registered(self) -> None:
        if self.cause is None:
            return
        _LOG.info(
            "Worker task streams registered again after losing the Dex server (%s): "
            "%d stream disconnects, %d tasks whose final frame found their stream gone",
            self.cause,
            self.disconnects,
            self.lost_frames,
        )
        self.cause = None
        self.disconnects = self.lost_frames = 0


def _cause(error: object) -> str:
    """``UNAVAILABLE: failed to connect ...`` for a gRPC error, else its text."""
    code = getattr(error, "code", None)
    details = getattr(error, "details", None)
    if callable(code) and callable(details):
        status: Any = code()
        return f"{getattr(status, 'name', status)}: {details()}"
    return str(error)


def _is_stream_gone(failure: BaseException | None) -> bool:
    """Whether ``failure`` is a write or read on a stream the server side ended."""
    import grpc

    return isinstance(failure, (asyncio.InvalidStateError, grpc.RpcError, grpc.aio.UsageError))


def quiet_pull_worker_logs() -> bool:
    """Log a lost server connection once per outage; True when applied.

    Process-wide and idempotent. The other records of the SDK's ``dex._pull_worker``
    logger pass unchanged. Returns False (and logs why) for an SDK release other than
    ``PATCHED_SDK_VERSION`` or an unexpected SDK layout.
    """
    target = _patch_target(
        "dex.pull_registration",
        "_PullRegistration",
        "record_registered_stream",
        _QUIETED,
        "quieting reconnect logs",
    )
    if isinstance(target, bool):
        return target
    registration_type, original = target
    logs = _ReconnectLogs()
    logging.getLogger("dex._pull_worker").addFilter(logs)

    def record_registered_stream(self: Any, queue: str) -> None:
        original(self, queue)
        logs.registered()

    registration_type.record_registered_stream = record_registered_stream
    setattr(registration_type, _QUIETED, True)
    return True


# --- the Step's protobuf Context ---------------------------------------------------------


@functools.cache
def _reads_context_privates(what: str) -> bool:
    """Whether this SDK release keeps an invocation context's private parts where the
    reads below expect them (logged once per ``what`` when it does not)."""
    try:
        import dex._server_protocol as server_protocol
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not %s: %s", what, error)
        return False
    return _written_for(server_protocol.sdk_version(), what)


def step_context_metadata(context: object) -> pb.Context | None:
    """The protobuf ``Context`` a Step method's ``context`` was built from, or None.

    dex-python-sdk 1.23.0 keeps it as the private ``_metadata`` of its invocation
    context. None for another SDK release (logged once), or for a context that is not
    the SDK's.
    """
    if not _reads_context_privates("reading the attempt progress of recovery errors"):
        return None
    metadata = getattr(context, "_metadata", None)
    return metadata if isinstance(metadata, pb.Context) else None


def committed_attribute_string(context: object, name: str) -> str | None:
    """The committed value of Attribute ``name`` when it is a Dex string, else None.

    Dex's value mapper hands a codec only values of the codec's own wire kind, and no
    public call reads a stored value as another kind; dex-python-sdk 1.23.0 keeps the
    values a handler was given as the private ``_attributes`` of its invocation
    context. None for another SDK release (logged once), an unset Attribute or a value
    of another kind.
    """
    if not _reads_context_privates("reading session settings of the old shape"):
        return None
    committed: object = getattr(context, "_attributes", None)
    if not isinstance(committed, Mapping):
        return None
    value: Any = cast("Mapping[str, Any]", committed).get(name)
    if value is None or value.WhichOneof("kind") != "string_value":
        return None
    text: object = value.string_value
    return text if isinstance(text, str) else None
