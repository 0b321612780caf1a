"""Deprecated: ``dex_agents_openai_agents.mcp_keys`` is private now.

The runner stamps the session's idempotency key on MCP calls with it; nothing in it is
public. Its names still import from here, with a ``DeprecationWarning``, until the next
release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _mcp

if TYPE_CHECKING:
    from dex_agents_openai_agents._mcp import (
        stamp_mcp_idempotency_keys as stamp_mcp_idempotency_keys,
    )

__getattr__ = deprecated_aliases(
    __name__,
    {
        "stamp_mcp_idempotency_keys": (
            "the private dex_agents_openai_agents._mcp.stamp_mcp_idempotency_keys",
            _mcp.stamp_mcp_idempotency_keys,
        ),
    },
)
