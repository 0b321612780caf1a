"""The agent graph a model step runs: the user's agents with every function tool deferred.

Each agent reachable through handoffs is cloned with its function tools (MCP
tools included) replaced by copies that need approval and, when approved, only
replay the result the session recorded. So ``Runner.run`` stops before any tool
runs, and on resume the SDK feeds the recorded results back itself.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agents import Agent, FunctionTool, Handoff, RunContextWrapper, Tool, handoff
from agents.tool_context import ToolContext

from dex_agents.builtin_tools import BuiltInToolDefinition

__all__ = [
    "DeferringGraph",
    "ReplayFunction",
    "UnknownHandoffTargetError",
    "build_deferring_graph",
    "reachable_agents",
]

ReplayFunction = Callable[[ToolContext[Any], str], Awaitable[str]]


@dataclass
class DeferringGraph:
    """The cloned graph (``root``) and the real tools, by agent name and tool name."""

    root: Agent[Any]
    real_tools: dict[str, dict[str, FunctionTool]]
    built_in_names: frozenset[str]
    agents: list[Agent[Any]] = field(default_factory=list[Agent[Any]])
    """Keeps every clone alive: handoffs hold only weak references."""

    def real_tool(self, agent_name: str | None, tool_name: str) -> FunctionTool | None:
        """The real tool ``tool_name`` of ``agent_name`` (or of any agent when unknown)."""
        if agent_name is not None and agent_name in self.real_tools:
            return self.real_tools[agent_name].get(tool_name)
        for tools in self.real_tools.values():
            if tool_name in tools:
                return tools[tool_name]
        return None


class UnknownHandoffTargetError(ValueError):
    """A ``Handoff`` object leads to an agent the runner was not given."""


def reachable_agents(
    root: Agent[Any], handoff_agents: Sequence[Agent[Any]] = ()
) -> list[Agent[Any]]:
    """``root``, ``handoff_agents`` and every agent reachable from them, ``root`` first.

    An ``Agent`` in ``handoffs`` leads to itself. A ``Handoff`` object (``handoff(...)``)
    does not say which agent it leads to, only the agent's name (``agent_name``): that
    name must be one of the agents found here, or ``handoff_agents`` must list it.
    """
    seen: set[int] = set()
    ordered: list[Agent[Any]] = []
    queue: deque[Agent[Any]] = deque([root, *handoff_agents])
    handoff_names: dict[str, str] = {}
    while queue:
        agent = queue.popleft()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        ordered.append(agent)
        for item in agent.handoffs:
            if isinstance(item, Agent):
                queue.append(item)
            else:
                handoff_names.setdefault(item.agent_name, agent.name)
    names = [agent.name for agent in ordered]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(
            f"agents reachable through handoffs need unique names to resume; repeated: {duplicates}"
        )
    for target, source in handoff_names.items():
        if target not in names:
            raise UnknownHandoffTargetError(
                f"agent {source!r} has a handoff to agent {target!r}, which is not reachable"
                " through agents listed in handoffs; pass it to the runner in"
                f" handoff_agents=[...] (known agents: {names})"
            )
    return ordered


def _deferred_copy(tool: FunctionTool, replay: ReplayFunction) -> FunctionTool:
    # The copy keeps the name, schema and namespace the model sees; everything that
    # would run around the real body (guardrails, timeout, output schema) stays with
    # the real tool, which the tool Step runs.
    return dataclasses.replace(
        tool,
        on_invoke_tool=replay,
        needs_approval=True,
        is_enabled=True,
        tool_input_guardrails=None,
        tool_output_guardrails=None,
        timeout_seconds=None,
        output_json_schema=None,
        custom_data_extractor=None,
    )


def _built_in_tool(definition: BuiltInToolDefinition, replay: ReplayFunction) -> FunctionTool:
    return FunctionTool(
        name=definition.name,
        description=definition.description,
        params_json_schema=dict(definition.parameters),
        on_invoke_tool=replay,
        strict_json_schema=False,
        needs_approval=True,
    )


async def build_deferring_graph(
    root: Agent[Any],
    run_context: RunContextWrapper[Any],
    replay: ReplayFunction,
    built_ins: Sequence[BuiltInToolDefinition] = (),
    *,
    handoff_agents: Sequence[Agent[Any]] = (),
    planning: bool = False,
) -> DeferringGraph:
    """Clone ``root`` and every agent reachable through handoffs, with deferred tools.

    ``handoff_agents`` are the agents that ``Handoff`` objects lead to (see
    ``reachable_agents``). A planning turn's clones offer only the built-in tools
    (``write_todos``) and no handoffs, so the model can only write the plan.
    """
    originals = reachable_agents(root, handoff_agents)
    built_in_names = frozenset(definition.name for definition in built_ins)
    real_tools: dict[str, dict[str, FunctionTool]] = {}
    clones: dict[int, Agent[Any]] = {}
    for agent in originals:
        tools: list[Tool] = []
        by_name: dict[str, FunctionTool] = {}
        for tool in [] if planning else await agent.get_all_tools(run_context):
            if isinstance(tool, FunctionTool):
                if tool.name in built_in_names:
                    raise ValueError(
                        f"tool {tool.name!r} of agent {agent.name!r} uses the name of an"
                        " enabled built-in tool"
                    )
                by_name[tool.name] = tool
                tools.append(_deferred_copy(tool, replay))
            else:
                tools.append(tool)  # Hosted and other SDK-run tools are passed through.
        tools.extend(_built_in_tool(definition, replay) for definition in built_ins)
        real_tools[agent.name] = by_name
        clones[id(agent)] = agent.clone(tools=tools, mcp_servers=[], handoffs=[])
    if not planning:
        clones_by_name = {agent.name: clones[id(agent)] for agent in originals}
        for agent in originals:
            clones[id(agent)].handoffs = [
                _rewired(item, clones, clones_by_name) for item in agent.handoffs
            ]
    return DeferringGraph(
        root=clones[id(root)],
        real_tools=real_tools,
        built_in_names=built_in_names,
        agents=list(clones.values()),
    )


# The public fields a rebuilt handoff takes from the original: all but its name and
# target, which ``handoff()`` sets, and the invoke function, which is wrapped.
_COPIED_HANDOFF_FIELDS = tuple(
    entry.name
    for entry in dataclasses.fields(Handoff)
    if not entry.name.startswith("_")
    and entry.name not in ("tool_name", "agent_name", "on_invoke_handoff")
)


def _rewired(
    item: Agent[Any] | Handoff[Any, Any],
    clones: dict[int, Agent[Any]],
    clones_by_name: dict[str, Agent[Any]],
) -> Agent[Any] | Handoff[Any, Any]:
    """The clone's handoff entry: the target's clone, or a ``Handoff`` leading to it.

    A ``Handoff`` is rebuilt with the public ``handoff()`` factory on the target's clone,
    so the SDK's own walks of the graph (restoring a ``RunState`` finds the current agent
    by name among them) reach the clones, and takes the original's public fields (tool
    name, description, schema, input filter, switches). Its ``on_invoke_handoff`` still
    runs the original's (``on_handoff`` callbacks, input validation) and swaps the agent
    it returns for its clone, so the target's tools stay deferred.
    """
    if isinstance(item, Agent):
        return clones[id(item)]
    clone = clones_by_name[item.agent_name]
    default_name = Handoff.default_tool_name(clone)
    rewired = handoff(
        clone, tool_name_override=None if item.tool_name == default_name else item.tool_name
    )
    for name in _COPIED_HANDOFF_FIELDS:
        setattr(rewired, name, getattr(item, name))
    original = item.on_invoke_handoff

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
        target = cast(Agent[Any], await original(context, arguments))
        if id(target) not in clones:
            raise UnknownHandoffTargetError(
                f"handoff {item.tool_name!r} led to an agent named {target.name!r} that the"
                " runner was not given; pass that agent object in handoff_agents=[...]"
            )
        return clones[id(target)]

    rewired.on_invoke_handoff = invoke
    return rewired
