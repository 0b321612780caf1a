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

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from dex.dexpb import dex_pb2 as pb

__all__ = [
    "KEPT_SPARE_STREAMS",
    "PATCHED_SDK_VERSION",
    "committed_attribute_string",
    "keep_finished_pull_streams",
    "memoize_sdk_version",
    "route_in_process_channels",
    "step_context_metadata",
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
