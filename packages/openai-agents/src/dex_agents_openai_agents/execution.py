"""What a running tool or model can read about the session: the current deferred call or turn.

The runner sets these for the duration of one call, in the task that runs the
tool or the model, so they are visible to the tool body (and to a ``Model`` of
the agent) without changing any SDK signature.
"""

from __future__ import annotations

from contextvars import ContextVar

from dex_agents import DeferredToolExecution
from dex_agents.runner import AgentTurnContext

__all__ = ["get_deferred_tool_execution", "get_model_step_context"]

_DEFERRED_TOOL_EXECUTION: ContextVar[DeferredToolExecution | None] = ContextVar(
    "dex_agents_openai_agents_deferred_tool_execution", default=None
)
_MODEL_STEP: ContextVar[AgentTurnContext | None] = ContextVar(
    "dex_agents_openai_agents_model_step", default=None
)


def get_deferred_tool_execution() -> DeferredToolExecution:
    """The deferred call a tool body runs for: idempotency key, attempt, record, heartbeat.

    Call it from a function tool while the session runs it (in ``CallTool`` or
    ``CallSingleAttemptTool``). Pass ``idempotency_key`` to the remote system so
    a retried write is dropped. Raises ``LookupError`` outside a deferred call.
    """
    execution = _DEFERRED_TOOL_EXECUTION.get()
    if execution is None:
        raise LookupError(
            "get_deferred_tool_execution() is only available inside a tool that the "
            "dex-agents session runs"
        )
    return execution


def get_model_step_context() -> AgentTurnContext:
    """The turn a model call belongs to (turn ID, attempt, events), inside ``RunModel``.

    Raises ``LookupError`` outside a model step.
    """
    turn = _MODEL_STEP.get()
    if turn is None:
        raise LookupError("get_model_step_context() is only available inside a RunModel step")
    return turn


deferred_tool_execution_var = _DEFERRED_TOOL_EXECUTION
model_step_var = _MODEL_STEP
