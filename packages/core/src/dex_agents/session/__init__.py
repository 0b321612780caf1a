"""The agent session Flow: Steps, persistence, RPCs and events over a runner."""

from dex_agents.session.flow import AgentSessionFlow, create_agent_session_flow
from dex_agents.session.options import (
    DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    DEFAULT_MAX_DURABLE_WAIT,
    AgentSessionOptions,
    AgentSessionOptionValues,
)
from dex_agents.session.persistence import SessionPersistence

__all__ = [
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
    "DEFAULT_MAX_DURABLE_WAIT",
    "AgentSessionFlow",
    "AgentSessionOptionValues",
    "AgentSessionOptions",
    "SessionPersistence",
    "create_agent_session_flow",
]
