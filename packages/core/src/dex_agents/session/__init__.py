"""The session Flow: its Steps, rules, persistence, RPCs and events (all private).

Build a session Flow with ``dex_agents.create_agent_session_flow``; the names this
package exported before 0.1 still import from it, with a ``DeprecationWarning``, for
one release.
"""

from typing import TYPE_CHECKING

from dex_agents._deprecation import moved_names as _moved_names

__all__: list[str] = []

__getattr__ = _moved_names(
    __name__,
    {
        "AgentSessionFlow": "dex_agents",
        "AgentSessionOptionValues": "dex_agents",
        "AgentSessionOptions": "dex_agents",
        "create_agent_session_flow": "dex_agents",
        "DEFAULT_EVENT_STREAM_CAPACITY_BYTES": "dex_agents.session._options",
        "DEFAULT_MAX_DURABLE_WAIT": "dex_agents.session._options",
        "SessionPersistence": "dex_agents.session._persistence",
    },
)

if TYPE_CHECKING:  # the deprecated names, for type checkers during their last release
    from dex_agents.session._flow import AgentSessionFlow as AgentSessionFlow
    from dex_agents.session._flow import create_agent_session_flow as create_agent_session_flow
    from dex_agents.session._options import (
        DEFAULT_EVENT_STREAM_CAPACITY_BYTES as DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    )
    from dex_agents.session._options import (
        DEFAULT_MAX_DURABLE_WAIT as DEFAULT_MAX_DURABLE_WAIT,
    )
    from dex_agents.session._options import AgentSessionOptions as AgentSessionOptions
    from dex_agents.session._options import (
        AgentSessionOptionValues as AgentSessionOptionValues,
    )
    from dex_agents.session._persistence import SessionPersistence as SessionPersistence
