"""What code running inside a session Step can read about it.

A Pydantic AI tool runs with its usual ``RunContext`` (``ctx.deps``,
``ctx.tool_call_id``); the session's side of the call, such as the idempotency
key to pass on to a remote system, is available through
``get_deferred_tool_execution()`` and, for convenience, in ``ctx.metadata`` under
``"dex_idempotency_key"``. Code the model step runs (a model wrapper, a dynamic
instruction, a capability) can read the turn through ``get_model_step_context()``.
Both are the same functions in every dex-agents adapter (``dex_agents.adapter_support``).
"""

from __future__ import annotations

from dex_agents.adapter_support import (
    DEX_IDEMPOTENCY_KEY,
    current_deferred_tool_execution,
    current_model_step_context,
    get_deferred_tool_execution,
    get_model_step_context,
    serving_deferred_tool_execution,
    serving_model_step,
)

__all__ = [
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "get_deferred_tool_execution",
    "get_model_step_context",
    "serving_deferred_tool_execution",
    "serving_model_step",
]

IDEMPOTENCY_KEY_METADATA_KEY = DEX_IDEMPOTENCY_KEY
"""``RunContext.metadata`` key of the call's idempotency key while the tool runs."""
