"""Opt-in patches of dex-python-sdk 1.23.0: a fix proposed upstream, and in-process channels.

The SDK reads its own package metadata (``importlib.metadata.version``, which scans
``sys.path`` and parses a metadata file) every time a pull stream registers, and a
pull Worker opens a new stream for about every task it runs: the Worker keeps
``idle_streams_per_queue`` idle streams, so a stream that takes a task gets an idle
replacement and retires once the task is done. No SDK option or Worker setting keeps
streams or the version; the lookup measured 27 % of a pull Worker's busy time.

The installed SDK version cannot change while a process runs, so the proposed
upstream fix is to compute it once (``functools.cache`` on
``dex._server_protocol.sdk_version``). Until the SDK does that,
:func:`memoize_sdk_version` applies exactly that change, explicitly: call it once
before starting Workers. It only patches the SDK release it was written for and
otherwise leaves the SDK alone and says so.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, cast

_LOG = logging.getLogger("dex_local_engine.sdk_patches")

PATCHED_SDK_VERSION = "1.23.0"


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
    installed = cached()
    if installed != PATCHED_SDK_VERSION:
        _LOG.warning(
            "not memoizing the SDK version: written for dex-python-sdk %s, found %s",
            PATCHED_SDK_VERSION,
            installed,
        )
        return False
    server_protocol.sdk_version = cached
    cast(Any, pull_worker).sdk_version = cached
    return True


_ROUTED = "_dex_local_engine_in_process"


def route_in_process_channels() -> bool:
    """Give SDK async channels to an in-process engine's address an in-process channel.

    Patches the channel factories of ``dex.async_client``, ``dex.async_worker`` and
    ``dex._pull_worker``: an address an ``EngineServer(in_process=True)`` registered
    gets a :class:`dex_local_engine.in_process.InProcessChannel` (each call goes to the
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
    installed = server_protocol.sdk_version()
    if installed != PATCHED_SDK_VERSION:
        _LOG.warning(
            "not routing channels in process: written for dex-python-sdk %s, found %s",
            PATCHED_SDK_VERSION,
            installed,
        )
        return False
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
