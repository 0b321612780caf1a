"""Reading the steering, cancellation and plan state from a Dex Context."""

from __future__ import annotations

from dex import Context

from dex_agents._values import AgentPlan, TurnCancellationRequest
from dex_agents.session._persistence import SessionPersistence
from dex_agents.session._store import read_optional
from dex_agents.session._turn_control_rules import TurnControl, turn_control

__all__ = ["is_turn_cancelled", "read_cancellation_request", "read_plan", "read_turn_control"]


def read_plan(context: Context, persistence: SessionPersistence) -> AgentPlan | None:
    return read_optional(persistence.agent_plan, context)


def read_cancellation_request(
    context: Context, persistence: SessionPersistence
) -> TurnCancellationRequest | None:
    return read_optional(persistence.turn_cancellation_request, context)


def read_turn_control(
    context: Context, persistence: SessionPersistence, turn_id: str | None
) -> TurnControl:
    """Whether ``turn_id`` is steered (steered messages wait) or cancelled (its request)."""
    return turn_control(
        turn_id,
        steered_message_count=persistence.steered_user_messages.size(context),
        cancellation=read_cancellation_request(context, persistence),
    )


def is_turn_cancelled(context: Context, persistence: SessionPersistence, turn_id: str) -> bool:
    """Whether ``cancel_turn`` cancelled ``turn_id``: it then abandons the turn's tool tasks."""
    return read_turn_control(context, persistence, turn_id).cancelled
