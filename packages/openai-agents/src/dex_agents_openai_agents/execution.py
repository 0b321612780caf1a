"""What a running tool or model can read about the session: the current deferred call or turn.

The runner sets these for the duration of one call, in the task that runs the
tool or the model, so they are visible to the tool body (and to a ``Model`` of
the agent) without changing any SDK signature. They are the same functions in
every dex-agents adapter (``dex_agents.adapter_support``).
"""

from __future__ import annotations

from dex_agents.adapter_support import (
    current_deferred_tool_execution,
    current_model_step_context,
    get_deferred_tool_execution,
    get_model_step_context,
)

__all__ = [
    "current_deferred_tool_execution",
    "current_model_step_context",
    "get_deferred_tool_execution",
    "get_model_step_context",
]
