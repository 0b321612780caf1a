"""What a LangChain tool declares about its effect, and the policy of each call.

A tool declares its effect in its ``metadata`` under ``"dex_effect"`` (a
``ToolEffect`` or its wire value, such as ``"read"``) and may set
``"dex_requires_approval"``. ``declare_tool_effect(tool, effect)`` returns a copy
of a tool that declares both; ``dex_tool_metadata(effect)`` is the metadata for
a tool you build yourself (``StructuredTool.from_function(metadata=...)``). The
session's ``ToolPolicy`` for the tool's name wins over the declaration, and a
tool that declares nothing gets the session's default effect. The keys and the
precedence are the same in every dex-agents adapter (``dex_agents.adapter_support``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from dex_agents import AgentTurnContext, ResolvedToolPolicy, ToolEffect
from dex_agents.adapter_support import (
    BUILT_IN_TOOL_POLICY,
    DEX_EFFECT_METADATA_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    UNKNOWN_TOOL_POLICY,
    declared_approval_in,
    declared_effect_in,
    resolve_declared_tool_policy,
    tool_declaration_metadata,
)

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "declare_tool_effect",
    "declared_approval",
    "declared_effect",
    "dex_tool_metadata",
    "tool_call_policy",
]

ToolT = TypeVar("ToolT", bound=BaseTool)


def dex_tool_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata that declares ``effect`` (and approval, when given) to the session."""
    return tool_declaration_metadata(effect, requires_approval=requires_approval)


def declare_tool_effect(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """A copy of ``tool`` that declares ``effect`` (and approval, when given) in its metadata.

    The tool's other metadata is kept; an earlier ``dex_requires_approval`` is
    dropped unless ``requires_approval`` is given again.
    """
    if not isinstance(tool, BaseTool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool must be a LangChain BaseTool, got {type(tool).__name__}")
    metadata: dict[str, Any] = dict(tool.metadata or {})
    metadata.pop(DEX_REQUIRES_APPROVAL_METADATA_KEY, None)
    metadata.update(tool_declaration_metadata(effect, requires_approval=requires_approval))
    return tool.model_copy(update={"metadata": metadata})


def declared_effect(tool: BaseTool) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, or ``None``."""
    return declared_effect_in(tool.metadata, tool.name)


def declared_approval(tool: BaseTool) -> bool | None:
    """Whether ``tool`` declares that its calls need approval, or ``None`` when it does not say."""
    return declared_approval_in(tool.metadata, tool.name)


def check_tool_declarations(tool: BaseTool) -> None:
    """Raise ``ValueError`` when ``tool``'s metadata holds an invalid declaration."""
    declared_effect(tool)
    declared_approval(tool)


def tool_call_policy(
    turn: AgentTurnContext, tool_name: str, tool: BaseTool | None
) -> ResolvedToolPolicy:
    """The policy of one call: session ``ToolPolicy``, then the tool's declaration, then default.

    A call of an enabled built-in tool is the session's to handle. A call of a
    tool the runner does not have fails in its tool Step without any effect, so
    it asks no approval.
    """
    if tool_name in turn.enabled_built_in_tools:
        return BUILT_IN_TOOL_POLICY
    if tool_name in turn.tool_policies:
        return turn.resolve_tool_policy(tool_name)
    if tool is None:
        return UNKNOWN_TOOL_POLICY
    return resolve_declared_tool_policy(
        turn, tool_name, declared_effect(tool), declared_approval(tool)
    )
