"""Deprecated: ``dex_agents_openai_agents.runner`` is private now.

Import its public names from ``dex_agents_openai_agents``. Its names still import from here,
with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _runner

if TYPE_CHECKING:
    from dex_agents_openai_agents._runner import ContextFactory as ContextFactory
    from dex_agents_openai_agents._runner import OpenAIAgentsRunner as OpenAIAgentsRunner
    from dex_agents_openai_agents._runner import (
        UnsupportedInterruptionError as UnsupportedInterruptionError,
    )

__getattr__ = deprecated_aliases(
    __name__,
    {
        "ContextFactory": ("dex_agents_openai_agents.ContextFactory", _runner.ContextFactory),
        "OpenAIAgentsRunner": (
            "dex_agents_openai_agents.OpenAIAgentsRunner",
            _runner.OpenAIAgentsRunner,
        ),
        "UnsupportedInterruptionError": (
            "dex_agents_openai_agents.UnsupportedInterruptionError",
            _runner.UnsupportedInterruptionError,
        ),
    },
)
