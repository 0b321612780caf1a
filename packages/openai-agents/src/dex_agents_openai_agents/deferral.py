"""Deprecated: ``dex_agents_openai_agents.deferral`` is private now.

The runner defers every function tool of a model step with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _tools

if TYPE_CHECKING:
    from dex_agents_openai_agents._tools import DeferringGraph as DeferringGraph
    from dex_agents_openai_agents._tools import ReplayFunction as ReplayFunction
    from dex_agents_openai_agents._tools import (
        UnknownHandoffTargetError as UnknownHandoffTargetError,
    )
    from dex_agents_openai_agents._tools import build_deferring_graph as build_deferring_graph
    from dex_agents_openai_agents._tools import reachable_agents as reachable_agents

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DeferringGraph": (
            "the private dex_agents_openai_agents._tools.DeferringGraph",
            _tools.DeferringGraph,
        ),
        "ReplayFunction": (
            "the private dex_agents_openai_agents._tools.ReplayFunction",
            _tools.ReplayFunction,
        ),
        "UnknownHandoffTargetError": (
            "the private dex_agents_openai_agents._tools.UnknownHandoffTargetError",
            _tools.UnknownHandoffTargetError,
        ),
        "build_deferring_graph": (
            "the private dex_agents_openai_agents._tools.build_deferring_graph",
            _tools.build_deferring_graph,
        ),
        "reachable_agents": (
            "the private dex_agents_openai_agents._tools.reachable_agents",
            _tools.reachable_agents,
        ),
    },
)
