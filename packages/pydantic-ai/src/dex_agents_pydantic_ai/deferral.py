"""Deprecated: ``dex_agents_pydantic_ai.deferral`` is private now.

The runner defers every tool call of a model step with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_pydantic_ai import _tools

if TYPE_CHECKING:
    from dex_agents_pydantic_ai._tools import DeferEveryToolCall as DeferEveryToolCall
    from dex_agents_pydantic_ai._tools import RefuseToolDeferral as RefuseToolDeferral
    from dex_agents_pydantic_ai._tools import RunSettingsSeen as RunSettingsSeen
    from dex_agents_pydantic_ai._tools import tool_deferred_its_call as tool_deferred_its_call

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DeferEveryToolCall": (
            "the private dex_agents_pydantic_ai._tools.DeferEveryToolCall",
            _tools.DeferEveryToolCall,
        ),
        "RefuseToolDeferral": (
            "the private dex_agents_pydantic_ai._tools.RefuseToolDeferral",
            _tools.RefuseToolDeferral,
        ),
        "RunSettingsSeen": (
            "the private dex_agents_pydantic_ai._tools.RunSettingsSeen",
            _tools.RunSettingsSeen,
        ),
        "tool_deferred_its_call": (
            "the private dex_agents_pydantic_ai._tools.tool_deferred_its_call",
            _tools.tool_deferred_its_call,
        ),
    },
)
