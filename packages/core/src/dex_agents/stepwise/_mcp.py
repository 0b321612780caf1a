"""``ToolSource``: how MCP tools, and any other tools listed at run time, reach Stepwise.

``dex_agents.mcp.McpToolSource`` is one: an ``AgentDefinition(tool_sources=[...])``
lists the MCP servers' tools in every ``RunModel``. A source turns a call of a
listed tool into a ``DeferredToolCall`` (its own policy, effect and reference),
and runs the call in the tool Step from the reference alone, without listing
again; the runner stores which source built each call
(``encode_source_reference``), so any Worker finds it by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dex_agents.models import ModelToolCall, ModelToolDefinition
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
)

__all__ = [
    "SourceToolReference",
    "ToolSource",
    "decode_source_reference",
    "encode_source_reference",
]

_SOURCE_KEY = "stepwise_tool_source"


@runtime_checkable
class ToolSource(Protocol):
    """Tools that are listed at run time.

    ``source_name`` must be unique in the agent and stable across deploys: a
    stored call finds its source by this name on any Worker.
    """

    @property
    def source_name(self) -> str: ...

    async def list_tools(self) -> Sequence[ModelToolDefinition]:
        """The tools to offer in this model call."""
        ...

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        """The call to defer, with its policy and ``tool_source_reference``.

        ``listed_tool`` is the definition the model was offered.
        """
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the call in its tool Step; ``call.tool_call.tool_source_reference`` is the
        source's own reference."""
        ...


@dataclass(frozen=True)
class SourceToolReference:
    """Which source built a stored call, and the source's own reference."""

    source_name: str
    reference: str | None


def encode_source_reference(source_name: str, reference: str | None) -> str:
    """The ``tool_source_reference`` stored on the record of a source's call."""
    return json.dumps({_SOURCE_KEY: source_name, "reference": reference}, separators=(",", ":"))


def decode_source_reference(stored: str | None) -> SourceToolReference | None:
    """The source of a stored call, or ``None`` for a call no source built."""
    if stored is None:
        return None
    try:
        value: Any = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(value, dict) or _SOURCE_KEY not in value:
        return None
    name: Any = value[_SOURCE_KEY]  # pyright: ignore[reportUnknownVariableType]
    reference: Any = value.get("reference")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(name, str) or not (reference is None or isinstance(reference, str)):
        return None
    return SourceToolReference(source_name=name, reference=reference)
