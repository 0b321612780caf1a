"""Deprecated: ``dex_agents_langgraph.runner`` is private now.

Import its public names from ``dex_agents_langgraph``. Its names still import from here,
with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_langgraph import _runner, _tools

if TYPE_CHECKING:
    from dex_agents_langgraph._runner import LangGraphRunner as LangGraphRunner
    from dex_agents_langgraph._tools import DEX_TOOL_EXECUTION_KEY as DEX_TOOL_EXECUTION_KEY
    from dex_agents_langgraph._tools import IDEMPOTENCY_KEY_CONFIG_KEY as IDEMPOTENCY_KEY_CONFIG_KEY
    from dex_agents_langgraph._tools import idempotency_key_of as idempotency_key_of
    from dex_agents_langgraph._tools import tool_execution_of as tool_execution_of

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DEX_TOOL_EXECUTION_KEY": (
            "dex_agents_langgraph.DEX_TOOL_EXECUTION_KEY",
            _tools.DEX_TOOL_EXECUTION_KEY,
        ),
        "IDEMPOTENCY_KEY_CONFIG_KEY": (
            "dex_agents_langgraph.IDEMPOTENCY_KEY_CONFIG_KEY",
            _tools.IDEMPOTENCY_KEY_CONFIG_KEY,
        ),
        "LangGraphRunner": ("dex_agents_langgraph.LangGraphRunner", _runner.LangGraphRunner),
        "idempotency_key_of": (
            "dex_agents_langgraph.idempotency_key_of",
            _tools.idempotency_key_of,
        ),
        "tool_execution_of": ("dex_agents_langgraph.tool_execution_of", _tools.tool_execution_of),
    },
)
