"""What code running inside a session Step can read about it.

A Pydantic AI tool runs with its usual ``RunContext`` (``ctx.deps``,
``ctx.tool_call_id``); the session's side of the call, such as the idempotency
key to pass on to a remote system, is available through
``current_tool_execution()`` and, for convenience, in ``ctx.metadata`` under
``"dex_idempotency_key"``. Code the model step runs (a model wrapper, a dynamic
instruction, a capability) can read the turn through ``current_model_step()``.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

from dex_agents import AgentTurnContext, DeferredToolExecution

__all__ = ["IDEMPOTENCY_KEY_METADATA_KEY", "current_model_step", "current_tool_execution"]

IDEMPOTENCY_KEY_METADATA_KEY = "dex_idempotency_key"
"""``RunContext.metadata`` key of the call's idempotency key while the tool runs."""

_tool_execution: ContextVar[DeferredToolExecution | None] = ContextVar(
    "dex_agents_pydantic_ai_tool_execution", default=None
)
_model_step: ContextVar[AgentTurnContext | None] = ContextVar(
    "dex_agents_pydantic_ai_model_step", default=None
)


def current_tool_execution() -> DeferredToolExecution | None:
    """The session call the running tool serves, or ``None`` outside a tool Step.

    It has ``idempotency_key`` (``<flow_id>/<turn_id>/<tool_call_id>``, the same
    on every attempt), ``attempt``, ``heartbeat()``, ``heartbeat_checkpoint``,
    ``save_heartbeat_checkpoint(text)`` and the call's record in ``tool_call``.
    """
    return _tool_execution.get()


def current_model_step() -> AgentTurnContext | None:
    """The turn whose model step is running (``flow_id``, ``turn_id``, ``attempt``,
    ``messages``, ``events``), or ``None`` outside a model step."""
    return _model_step.get()


@contextmanager
def serving_tool_execution(call: DeferredToolExecution) -> Generator[None]:
    """Make ``call`` the current tool execution for the duration of the block."""
    token = _tool_execution.set(call)
    try:
        yield
    finally:
        _tool_execution.reset(token)


@contextmanager
def serving_model_step(turn: AgentTurnContext) -> Generator[None]:
    """Make ``turn`` the current model step for the duration of the block."""
    token = _model_step.set(turn)
    try:
        yield
    finally:
        _model_step.reset(token)
