"""How a Pydantic AI tool declares its effect and approval to the session.

Precedence for each call: the session's ``ToolPolicy`` for the tool name first,
then what the tool declares, then the session's default effect.

A tool declares its effect with ``declare_tool_effect(tool, effect)`` (the same
call in every dex-agents adapter), or, where a decorator builds the tool, with
``metadata=dex_tool_metadata(effect)``: either way the effect is in its Pydantic
AI ``metadata`` under ``"dex_effect"`` (a ``ToolEffect`` or its wire value, such as ``"read"``), and
its approval with Pydantic AI's own ``requires_approval=True`` or under
``"dex_requires_approval"`` (a bool, which wins over ``requires_approval``).
A tool that declares no approval gets the default of its effect: approval for
``non_idempotent_write`` and ``unclassified``, none otherwise. The keys and the
precedence are the same in every dex-agents adapter (``dex_agents.adapter_support``).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from pydantic_ai import Tool
from pydantic_ai.tools import ToolDefinition

from dex_agents import AgentTurnContext, ResolvedToolPolicy, ToolEffect
from dex_agents.adapter_support import (
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    declared_approval_in,
    declared_effect_in,
    resolve_declared_tool_policy,
    tool_declaration_metadata,
)

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "declare_tool_effect",
    "declared_effect",
    "dex_tool_metadata",
    "resolve_call_policy",
]


def dex_tool_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata that declares ``effect`` (and approval, when given) to the session.

    Pass it as ``metadata=`` to ``@agent.tool``, ``Tool(...)`` or a toolset's
    ``tool`` decorator; merge it into metadata of your own with ``|``.
    """
    return tool_declaration_metadata(effect, requires_approval=requires_approval)


ToolT = TypeVar("ToolT", bound=Tool[Any])


def declare_tool_effect(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """A copy of ``tool`` (a ``pydantic_ai.Tool``) that declares ``effect`` (and approval).

    The tool's other metadata is kept; an earlier ``dex_requires_approval`` is
    dropped unless ``requires_approval`` is given again. For tools registered
    with a decorator, pass ``metadata=dex_tool_metadata(effect)`` instead.
    """
    if not isinstance(tool, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool must be a pydantic_ai.Tool, got {type(tool).__name__}")
    metadata: dict[str, Any] = dict(tool.metadata or {})
    metadata.pop(DEX_REQUIRES_APPROVAL_METADATA_KEY, None)
    metadata.update(tool_declaration_metadata(effect, requires_approval=requires_approval))
    declared = copy.copy(tool)
    declared.metadata = metadata
    return declared


def declared_effect(tool: ToolDefinition) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, else its MCP annotations, or ``None``.

    An MCP server's tool (``MCPToolset``) carries its annotations in its metadata:
    ``readOnlyHint`` is ``read`` and ``idempotentHint`` is ``idempotent_write``, as in
    ``dex_agents.mcp``; anything else leaves the default effect.
    """
    declared = declared_effect_in(tool.metadata, tool.name)
    if declared is not None:
        return declared
    annotations: Any = (tool.metadata or {}).get("annotations")
    if not isinstance(annotations, dict):
        return None
    hints: dict[str, Any] = annotations  # pyright: ignore[reportUnknownVariableType]
    if hints.get("readOnlyHint") is True:
        return ToolEffect.READ
    if hints.get("idempotentHint") is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None


def _declared_approval(tool: ToolDefinition) -> bool | None:
    approval = declared_approval_in(tool.metadata, tool.name)
    if approval is not None:
        return approval
    # Pydantic AI marks a tool declared with requires_approval=True as 'unapproved'.
    return True if tool.kind == "unapproved" else None


def resolve_call_policy(
    turn: AgentTurnContext, tool_name: str, declared: ToolDefinition | None
) -> ResolvedToolPolicy:
    """The policy of a call to ``tool_name``; ``declared`` is the tool as its toolset listed it.

    A name no toolset listed gets the session's policy or default effect: a
    toolset may list it again when the tool Step runs (an MCP server that was
    down), so its call still waits for approval when the default effect asks.
    """
    if declared is None:
        return turn.resolve_tool_policy(tool_name)
    return resolve_declared_tool_policy(
        turn, tool_name, declared_effect(declared), _declared_approval(declared)
    )
