"""An opt-in fix for dex-python-sdk 1.23.0 pull Workers, proposed upstream.

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
