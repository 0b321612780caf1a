"""Deprecated: ``dex_agents_pydantic_ai.session_history`` is private now.

The runner keeps each session's history per Worker with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_pydantic_ai import _messages

if TYPE_CHECKING:
    from dex_agents_pydantic_ai._messages import DEFAULT_KEPT_SESSIONS as DEFAULT_KEPT_SESSIONS
    from dex_agents_pydantic_ai._messages import SessionHistories as SessionHistories

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DEFAULT_KEPT_SESSIONS": (
            "the private dex_agents_pydantic_ai._messages.DEFAULT_KEPT_SESSIONS",
            _messages.DEFAULT_KEPT_SESSIONS,
        ),
        "SessionHistories": (
            "the private dex_agents_pydantic_ai._messages.SessionHistories",
            _messages.SessionHistories,
        ),
    },
)
