"""The agent graph a model step runs: the user's agents with every function tool deferred.

Each agent reachable through handoffs is cloned with its function tools (MCP
tools included) replaced by copies that need approval and, when approved, only
replay the result the session recorded. So ``Runner.run`` stops before any tool
runs, and on resume the SDK feeds the recorded results back itself.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agents import Agent, FunctionTool, Handoff, RunContextWrapper, Tool
from agents.tool_context import ToolContext

from dex_agents.builtin_tools import BuiltInToolDefinition

__all__ = ["DeferringGraph", "ReplayFunction", "build_deferring_graph", "handoff_target"]

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


def handoff_target(item: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | None:
    """The agent a handoff entry leads to, when the SDK can tell without running it."""
    if isinstance(item, Agent):
        return item
    reference = item._agent_ref  # pyright: ignore[reportPrivateUsage]
    target = reference() if reference is not None else None
    return cast(Agent[Any], target) if isinstance(target, Agent) else None


def _reachable_agents(root: Agent[Any]) -> list[Agent[Any]]:
    seen: set[int] = set()
    ordered: list[Agent[Any]] = []
    queue: deque[Agent[Any]] = deque([root])
    while queue:
        agent = queue.popleft()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        ordered.append(agent)
        for item in agent.handoffs:
            target = handoff_target(item)
            if target is not None:
                queue.append(target)
    names = [agent.name for agent in ordered]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(
            f"agents reachable through handoffs need unique names to resume; repeated: {duplicates}"
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
    planning: bool = False,
) -> DeferringGraph:
    """Clone ``root`` and every agent reachable through handoffs, with deferred tools.

    A planning turn's clones offer only the built-in tools (``write_todos``) and no
    handoffs, so the model can only write the plan.
    """
    originals = _reachable_agents(root)
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
    for agent in originals:
        if not planning:
            clones[id(agent)].handoffs = [_rewired(item, clones) for item in agent.handoffs]
    return DeferringGraph(
        root=clones[id(root)],
        real_tools=real_tools,
        built_in_names=built_in_names,
        agents=list(clones.values()),
    )


def _rewired(
    item: Agent[Any] | Handoff[Any, Any], clones: dict[int, Agent[Any]]
) -> Agent[Any] | Handoff[Any, Any]:
    if isinstance(item, Agent):
        return clones[id(item)]
    original = item.on_invoke_handoff

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
        target = cast(Agent[Any], await original(context, arguments))
        return clones.get(id(target), target)

    rewired = dataclasses.replace(item, on_invoke_handoff=invoke)
    target = handoff_target(item)
    if target is not None:
        rewired._agent_ref = weakref.ref(clones[id(target)])  # pyright: ignore[reportPrivateUsage]
    return rewired
