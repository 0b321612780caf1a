"""Deprecated: ``dex_agents_pydantic_ai.tool_step`` is private now.

The runner runs a deferred tool call with it; nothing in it is public. Its names still
import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_pydantic_ai import _tools

if TYPE_CHECKING:
    from dex_agents_pydantic_ai._tools import resolve_model as resolve_model
    from dex_agents_pydantic_ai._tools import run_tool_directly as run_tool_directly

__getattr__ = deprecated_aliases(
    __name__,
    {
        "resolve_model": (
            "the private dex_agents_pydantic_ai._tools.resolve_model",
            _tools.resolve_model,
        ),
        "run_tool_directly": (
            "the private dex_agents_pydantic_ai._tools.run_tool_directly",
            _tools.run_tool_directly,
        ),
    },
)
