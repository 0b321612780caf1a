"""Deprecated: ``dex_agents_pydantic_ai.runner`` is private now.

Import its public names from ``dex_agents_pydantic_ai``. Its names still import from here,
with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_pydantic_ai import _runner

if TYPE_CHECKING:
    from dex_agents_pydantic_ai._runner import DepsFactory as DepsFactory
    from dex_agents_pydantic_ai._runner import PydanticAIRunner as PydanticAIRunner

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DepsFactory": ("dex_agents_pydantic_ai.DepsFactory", _runner.DepsFactory),
        "PydanticAIRunner": ("dex_agents_pydantic_ai.PydanticAIRunner", _runner.PydanticAIRunner),
    },
)
