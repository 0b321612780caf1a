"""Test helpers for LangGraph agents: none of this package's own, for now.

A test model must answer from the messages it is given, since a session's model
steps may run in any Worker process (see "Testing your agent" in docs/runners/langgraph.md): write
a small ``BaseChatModel`` whose ``_generate`` decides from ``messages`` and whose
``bind_tools`` returns the model. The suite's scripted chat model moved to
``dex_agents_langgraph.conformance``; its old names here still work, with a
``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_langgraph import conformance

if TYPE_CHECKING:
    from dex_agents_langgraph.conformance import SCRIPTED_USAGE_METADATA as SCRIPTED_USAGE_METADATA
    from dex_agents_langgraph.conformance import ScriptedChatModel as ScriptedChatModel
    from dex_agents_langgraph.conformance import scenario_tool as scenario_tool

__all__: list[str] = []

__getattr__ = deprecated_aliases(
    __name__,
    {
        name: (f"dex_agents_langgraph.conformance.{name}", getattr(conformance, name))
        for name in ("SCRIPTED_USAGE_METADATA", "ScriptedChatModel", "scenario_tool")
    },
)
