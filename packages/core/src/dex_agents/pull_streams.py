"""Keep a pull Worker's streams open across tasks (dex-python-sdk 1.23.0, opt-out).

A pull Worker keeps ``idle_streams_per_queue`` idle streams per queue. When one takes a
task it gets an idle replacement at once, and once the task is done it sees enough idle
streams and retires. So the Worker opens, registers, drains and closes one stream per
Step or RPC (about 5.5 per session turn, measured): a call setup, a register frame, the
engine's registration, half-close and end of stream, on both sides of the connection.
No SDK option changes this.

:func:`keep_finished_pull_streams` raises only the bar for retiring: a stream that just
finished a task stays while fewer than ``spare`` streams beyond the desired idle ones
are idle. Creating streams is unchanged, so parallel Steps still find idle streams; a
queue holds at most ``idle_streams_per_queue + spare`` idle streams (each one an open
long poll on the engine), and a turn opens about one stream instead of 5.5. Stopping,
draining and reconnecting are the SDK's own. It patches only the SDK release it was
written for and otherwise leaves the SDK alone and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["KEPT_SPARE_STREAMS", "keep_finished_pull_streams"]

_LOG = logging.getLogger(__name__)

KEPT_SPARE_STREAMS = 2
"""Idle streams a queue keeps beyond ``idle_streams_per_queue`` before one retires."""

_RETIRING = "_dex_agents_retiring"
_PATCHED = "_dex_agents_keeps_streams"


def keep_finished_pull_streams(spare: int = KEPT_SPARE_STREAMS) -> bool:
    """Let a pull stream that finished a task stay open; True when applied.

    Process-wide and idempotent (the first ``spare`` stays). Returns False, and logs
    why, for an SDK release other than ``dex_local_engine.sdk_patches.PATCHED_SDK_VERSION``
    or an unexpected SDK layout.
    """
    if type(spare) is not int or spare < 1:
        raise ValueError("spare must be a positive integer")
    try:
        import dex._pull_worker as pull_worker
        import dex._server_protocol as server_protocol
    except ImportError as error:  # a different SDK layout: leave it alone
        _LOG.warning("not keeping pull streams: %s", error)
        return False
    from dex_local_engine.sdk_patches import PATCHED_SDK_VERSION

    runtime_type: Any = getattr(pull_worker, "PullWorkerRuntime", None)
    stream_type: Any = getattr(pull_worker, "PullStream", None)
    desired: Callable[[Any, str], int] | None = getattr(
        runtime_type, "desired_idle_streams_per_queue", None
    )
    retire: Callable[[Any], None] | None = getattr(stream_type, "try_retire", None)
    if desired is None or retire is None:
        _LOG.warning("not keeping pull streams: unexpected dex SDK layout")
        return False
    if getattr(stream_type, _PATCHED, False):
        return True
    installed = server_protocol.sdk_version()
    if installed != PATCHED_SDK_VERSION:
        _LOG.warning(
            "not keeping pull streams: written for dex-python-sdk %s, found %s",
            PATCHED_SDK_VERSION,
            installed,
        )
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
    setattr(stream_type, _PATCHED, True)
    return True
