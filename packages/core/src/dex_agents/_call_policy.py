"""``call_policy``: the policy of one tool call, the same rule in every runner.

Stepwise and every framework adapter resolve the policy of each call they defer
with ``call_policy``, in this order:

1. a call of an enabled built-in tool (``turn.enabled_built_in_tools``) is the
   session's: ``BUILT_IN_TOOL_POLICY`` (``read``, no approval), whatever else is set;
2. the session's ``ToolPolicy`` for the tool's name wins over the tool's declaration;
3. a tool the runner has: the effect it declares, else the session's
   ``default_tool_effect``; the approval it declares, else that effect's default
   (``default_requires_approval``);
4. a tool the runner does not have (``known=False``): the session default, that is
   ``default_tool_effect`` and that effect's approval rule. The call is deferred like
   any other and fails in its tool Step (``unknown_tool_error``), after its approval
   when the default asks for one: the name may be a tool that a toolset lists again
   by then (an MCP server that was down), and a model that invents a name gets no way
   around the session's approvals.
"""

from __future__ import annotations

from dex_agents._builtin_tools import BUILT_IN_TOOL_POLICY
from dex_agents._contract import AgentTurnContext, ResolvedToolPolicy
from dex_agents._values import ToolEffect

__all__ = ["call_policy"]


def call_policy(
    turn: AgentTurnContext,
    tool_name: str,
    *,
    known: bool,
    declared_effect: ToolEffect | str | None = None,
    declared_approval: bool | None = None,
) -> ResolvedToolPolicy:
    """The policy of a call of ``tool_name`` in ``turn``; see the module docstring.

    ``known`` says whether the runner has a tool of that name (a built-in tool is
    known to the session either way). ``declared_effect`` (a ``ToolEffect`` or its
    text, such as ``"read"``) and ``declared_approval`` are what the tool itself
    declares, ``None`` for nothing; a tool the runner does not have declares nothing,
    so passing either with ``known=False`` raises ``ValueError``, as does an unknown
    effect text.
    """
    if not known and (declared_effect is not None or declared_approval is not None):
        raise ValueError(
            f"tool {tool_name!r} is not known to the runner, so it declares nothing; pass"
            " known=True with the tool's declaration, or no declaration"
        )
    if declared_approval is not None and not isinstance(declared_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"declared_approval of tool {tool_name!r} must be a bool or None")
    if tool_name in turn.enabled_built_in_tools:
        return BUILT_IN_TOOL_POLICY
    if tool_name in turn.tool_policies:
        return turn.resolve_tool_policy(tool_name)
    # The declared effect, else the default effect; approval by that effect.
    resolved = turn.resolve_tool_policy(tool_name, declared_effect)
    if declared_approval is None:
        return resolved
    return ResolvedToolPolicy(resolved.effect, declared_approval)
