"""What a LangChain tool declares about its effect, and the policy of each call.

A tool declares its effect in its ``metadata`` under ``"dex_effect"`` (a
``ToolEffect`` or its wire value, such as ``"read"``) and may set
``"dex_requires_approval"``. ``with_tool_policy`` writes both. The session's
``ToolPolicy`` for the tool's name wins over the declaration, and a tool that
declares nothing gets the session's default effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from dex_agents import (
    AgentTurnContext,
    ResolvedToolPolicy,
    ToolEffect,
    default_requires_approval,
)

__all__ = [
    "EFFECT_METADATA_KEY",
    "REQUIRES_APPROVAL_METADATA_KEY",
    "declared_approval",
    "declared_effect",
    "tool_call_policy",
    "with_tool_policy",
]

EFFECT_METADATA_KEY = "dex_effect"
REQUIRES_APPROVAL_METADATA_KEY = "dex_requires_approval"

_BUILT_IN_POLICY = ResolvedToolPolicy(ToolEffect.READ, False)
_UNKNOWN_TOOL_POLICY = ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)

ToolT = TypeVar("ToolT", bound=BaseTool)


def with_tool_policy(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """A copy of ``tool`` that declares ``effect`` (and approval, when given) in its metadata."""
    metadata: dict[str, Any] = dict(tool.metadata or {})
    metadata[EFFECT_METADATA_KEY] = ToolEffect(effect).value
    if requires_approval is not None:
        if not isinstance(requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("requires_approval must be a bool or None")
        metadata[REQUIRES_APPROVAL_METADATA_KEY] = requires_approval
    else:
        metadata.pop(REQUIRES_APPROVAL_METADATA_KEY, None)
    return tool.model_copy(update={"metadata": metadata})


def declared_effect(tool: BaseTool) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, or ``None``."""
    value = _metadata(tool).get(EFFECT_METADATA_KEY)
    if value is None:
        return None
    try:
        return ToolEffect(value)
    except ValueError:
        raise ValueError(
            f"tool {tool.name!r} declares metadata[{EFFECT_METADATA_KEY!r}] = {value!r};"
            f" use one of {[effect.value for effect in ToolEffect]}"
        ) from None


def declared_approval(tool: BaseTool) -> bool | None:
    """Whether ``tool`` declares that its calls need approval, or ``None`` when it does not say."""
    value = _metadata(tool).get(REQUIRES_APPROVAL_METADATA_KEY)
    if value is not None and not isinstance(value, bool):
        raise ValueError(
            f"tool {tool.name!r} declares metadata[{REQUIRES_APPROVAL_METADATA_KEY!r}] ="
            f" {value!r}; use true or false"
        )
    return value


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
        return _BUILT_IN_POLICY
    if tool_name in turn.tool_policies:
        return turn.resolve_tool_policy(tool_name)
    if tool is None:
        return _UNKNOWN_TOOL_POLICY
    resolved = turn.resolve_tool_policy(tool_name, declared_effect(tool))
    approval = declared_approval(tool)
    return ResolvedToolPolicy(
        resolved.effect,
        approval if approval is not None else default_requires_approval(resolved.effect),
    )


def _metadata(tool: BaseTool) -> Mapping[str, Any]:
    return tool.metadata or {}
