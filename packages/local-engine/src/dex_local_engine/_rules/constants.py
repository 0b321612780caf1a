"""Limits and reserved names the engine shares across its modules."""

from __future__ import annotations

DEFAULT_METHOD_TIMEOUT_SECONDS = 2 * 60 * 60
DEFAULT_RPC_TIMEOUT_SECONDS = 30
LONG_POLL_CAP_SECONDS = 30.0
WAIT_FOR_FLOW_CAP_SECONDS = 60.0
RPC_FROM_PREFIX = "__rpc/"
TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"  # the SDK routes it to Flow.handle_timeout
# Dex Server runs ASYNC Step methods inside the workflow task for up to this long.
LOCAL_METHOD_WINDOW_SECONDS = 7.0
