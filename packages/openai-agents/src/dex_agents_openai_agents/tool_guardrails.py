"""Deprecated: ``dex_agents_openai_agents.tool_guardrails`` is private now.

The runner runs a tool's guardrails in its tool Step with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _tools

if TYPE_CHECKING:
    from dex_agents_openai_agents._tools import check_tool_input as check_tool_input
    from dex_agents_openai_agents._tools import check_tool_output as check_tool_output

__getattr__ = deprecated_aliases(
    __name__,
    {
        "check_tool_input": (
            "the private dex_agents_openai_agents._tools.check_tool_input",
            _tools.check_tool_input,
        ),
        "check_tool_output": (
            "the private dex_agents_openai_agents._tools.check_tool_output",
            _tools.check_tool_output,
        ),
    },
)
