"""What a Pydantic AI tool can read about the session call it runs in.

The tool runs with its usual ``RunContext`` (``ctx.deps``, ``ctx.tool_call_id``);
the session's side of the call, such as the idempotency key to pass on to a
remote system, is available through ``current_tool_execution()`` and, for
convenience, in ``ctx.metadata`` under ``"dex_idempotency_key"``.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

from dex_agents import DeferredToolExecution

__all__ = ["IDEMPOTENCY_KEY_METADATA_KEY", "current_tool_execution"]

IDEMPOTENCY_KEY_METADATA_KEY = "dex_idempotency_key"
"""``RunContext.metadata`` key of the call's idempotency key while the tool runs."""

_current: ContextVar[DeferredToolExecution | None] = ContextVar(
    "dex_agents_pydantic_ai_tool_execution", default=None
)


def current_tool_execution() -> DeferredToolExecution | None:
    """The session call the running tool serves, or ``None`` outside a tool Step.

    It has ``idempotency_key`` (``<flow_id>/<turn_id>/<tool_call_id>``, the same
    on every attempt), ``attempt``, ``heartbeat()``, ``heartbeat_checkpoint``,
    ``save_heartbeat_checkpoint(text)`` and the call's record in ``tool_call``.
    """
    return _current.get()


@contextmanager
def serving_tool_execution(call: DeferredToolExecution) -> Generator[None]:
    """Make ``call`` the current tool execution for the duration of the block."""
    token = _current.set(call)
    try:
        yield
    finally:
        _current.reset(token)
