"""What a tool itself declares about its effect and approval.

The session's ``ToolPolicy`` always wins; a declaration only fills in what the
session leaves open, and the session's default effect covers tools that declare
nothing.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from agents import FunctionTool, RunContextWrapper

from dex_agents import ResolvedToolPolicy, ToolEffect
from dex_agents.adapter_support import (
    declared_effect_in,
    resolve_declared_tool_policy,
    tool_declaration_metadata,
)
from dex_agents.runner import AgentTurnContext

__all__ = [
    "DECLARATION_ATTRIBUTE",
    "ToolDeclaration",
    "declare_tool_effect",
    "declared_effect",
    "declared_requires_approval",
    "resolve_call_policy",
]

DECLARATION_ATTRIBUTE = "dex_agents_declaration"
"""Attribute on a ``FunctionTool`` holding its ``ToolDeclaration``."""

ToolT = TypeVar("ToolT", bound=FunctionTool)


@dataclass(frozen=True)
class ToolDeclaration:
    """A tool's own effect and, optionally, whether its calls need approval."""

    effect: ToolEffect
    requires_approval: bool | None = None


def declare_tool_effect(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """Declare ``tool``'s effect (and approval) on the tool itself; returns the same tool.

    ``requires_approval=None`` follows the effect, unless the tool's own
    ``needs_approval`` says yes.
    """
    metadata = tool_declaration_metadata(effect, requires_approval=requires_approval)
    declared = declared_effect_in(metadata, tool.name)
    assert declared is not None
    setattr(tool, DECLARATION_ATTRIBUTE, ToolDeclaration(declared, requires_approval))
    return tool


def _declaration(tool: FunctionTool) -> ToolDeclaration | None:
    value = getattr(tool, DECLARATION_ATTRIBUTE, None)
    return value if isinstance(value, ToolDeclaration) else None


def declared_effect(tool: FunctionTool) -> ToolEffect | None:
    """The effect ``tool`` declares: ``declare_tool_effect``, else its MCP annotations."""
    declaration = _declaration(tool)
    if declaration is not None:
        return declaration.effect
    # A public property since openai-agents 0.24; older releases keep MCP annotations to
    # themselves, so their MCP tools declare nothing (the session's defaults apply).
    annotations: object = getattr(tool, "mcp_annotations", None)
    if annotations is None:
        return None
    # MCP annotations are the server's hints; only the two clear ones are taken. The
    # attribute names follow the installed MCP SDK (snake_case in 2.x, camelCase before).
    if _hint(annotations, "read_only_hint", "readOnlyHint"):
        return ToolEffect.READ
    if _hint(annotations, "idempotent_hint", "idempotentHint"):
        return ToolEffect.IDEMPOTENT_WRITE
    return None


def _hint(annotations: object, *names: str) -> bool:
    return any(getattr(annotations, name, None) is True for name in names)


async def declared_requires_approval(
    tool: FunctionTool, run_context: RunContextWrapper[Any], arguments: str, call_id: str
) -> bool | None:
    """Whether ``tool`` asks for approval of this call, or ``None`` when it does not say.

    ``declare_tool_effect(requires_approval=...)`` wins; otherwise the SDK's own
    ``needs_approval`` counts when it says yes (a callable is asked with the call).
    """
    declaration = _declaration(tool)
    if declaration is not None and declaration.requires_approval is not None:
        return declaration.requires_approval
    needs_approval = tool.needs_approval
    if isinstance(needs_approval, bool):
        return True if needs_approval else None
    try:
        parsed: Any = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return True  # The SDK asks for manual approval of arguments it cannot read.
    answer = needs_approval(run_context, cast(dict[str, Any], parsed), call_id)
    if inspect.isawaitable(answer):
        answer = await answer
    return True if answer else None


def resolve_call_policy(
    turn: AgentTurnContext,
    tool_name: str,
    effect: ToolEffect | None,
    requires_approval: bool | None,
) -> ResolvedToolPolicy:
    """Session ``ToolPolicy`` first, then the tool's declaration, then the default effect."""
    return resolve_declared_tool_policy(turn, tool_name, effect, requires_approval)
