"""How a Pydantic AI tool declares its effect and approval to the session.

Precedence for each call: the session's ``ToolPolicy`` for the tool name first,
then what the tool declares, then the session's default effect.

A tool declares its effect in its Pydantic AI ``metadata`` under
``"dex_effect"`` (a ``ToolEffect`` or its wire value, such as ``"read"``), and
its approval with Pydantic AI's own ``requires_approval=True`` or under
``"dex_requires_approval"`` (a bool, which wins over ``requires_approval``).
A tool that declares no approval gets the default of its effect: approval for
``non_idempotent_write`` and ``unclassified``, none otherwise.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.tools import ToolDefinition

from dex_agents import AgentTurnContext, ResolvedToolPolicy, ToolEffect

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "declared_effect",
    "dex_tool_metadata",
    "resolve_call_policy",
]

DEX_EFFECT_METADATA_KEY = "dex_effect"
"""Tool metadata key of the tool's ``ToolEffect``."""

DEX_REQUIRES_APPROVAL_METADATA_KEY = "dex_requires_approval"
"""Tool metadata key of whether the tool's calls wait for approval (a bool)."""


def dex_tool_metadata(
    effect: ToolEffect, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata that declares ``effect`` (and approval, when given) to the session.

    Pass it as ``metadata=`` to ``@agent.tool``, ``Tool(...)`` or a toolset's
    ``tool`` decorator.
    """
    if not isinstance(effect, ToolEffect):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"effect must be a ToolEffect, got {effect!r}")
    metadata: dict[str, Any] = {DEX_EFFECT_METADATA_KEY: effect.value}
    if requires_approval is not None:
        if not isinstance(requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("requires_approval must be a bool or None")
        metadata[DEX_REQUIRES_APPROVAL_METADATA_KEY] = requires_approval
    return metadata


def declared_effect(tool: ToolDefinition) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, or ``None``."""
    value = (tool.metadata or {}).get(DEX_EFFECT_METADATA_KEY)
    if value is None:
        return None
    try:
        return ToolEffect(value)
    except ValueError:
        choices = ", ".join(repr(effect.value) for effect in ToolEffect)
        raise ValueError(
            f"tool {tool.name} declares {DEX_EFFECT_METADATA_KEY}={value!r}; use one of {choices}"
        ) from None


def _declared_approval(tool: ToolDefinition) -> bool | None:
    value = (tool.metadata or {}).get(DEX_REQUIRES_APPROVAL_METADATA_KEY)
    if value is not None:
        if not isinstance(value, bool):
            raise ValueError(
                f"tool {tool.name} declares {DEX_REQUIRES_APPROVAL_METADATA_KEY}={value!r};"
                " use True or False"
            )
        return value
    # Pydantic AI marks a tool declared with requires_approval=True as 'unapproved'.
    return True if tool.kind == "unapproved" else None


def resolve_call_policy(
    turn: AgentTurnContext, tool_name: str, declared: ToolDefinition | None
) -> ResolvedToolPolicy:
    """The policy of a call to ``tool_name``; ``declared`` is the tool as its toolset listed it."""
    if tool_name in turn.tool_policies or declared is None:
        return turn.resolve_tool_policy(tool_name)
    resolved = turn.resolve_tool_policy(tool_name, declared_effect(declared))
    approval = _declared_approval(declared)
    if approval is None:
        return resolved
    return ResolvedToolPolicy(resolved.effect, approval)
