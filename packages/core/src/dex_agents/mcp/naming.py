"""Deprecated: import from ``dex_agents.mcp``; this module goes away in the next release."""

from __future__ import annotations

from typing import Any

from dex_agents.mcp._deprecated import forward


def __getattr__(name: str) -> Any:
    return forward(__name__, name, ("dex_agents.mcp._naming",))
