"""SDK function tools under the session: what a tool declares, the deferring agent graph
of a model step, and what runs around a tool's body in its tool Step.

The session's ``ToolPolicy`` always wins; a declaration only fills in what the
session leaves open, and the session's default effect covers tools that declare
nothing (``dex_agents.runner.call_policy``, ``tool_call_policy``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    ItemHelpers,
    RunContextWrapper,
    Tool,
    handoff,
)
from agents.tool import (
    default_tool_error_function,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData
from openai.types.responses import ResponseFunctionToolCall

from dex_agents import (
    AgentTurnContext,
    ResolvedToolPolicy,
    ToolEffect,
    ToolExecutionError,
    describe_tool_call_outcome,
)
from dex_agents.adapter_support import declared_effect_in, tool_declaration_metadata
from dex_agents.builtin_tools import BuiltInToolDefinition
from dex_agents.runner import call_policy
from dex_agents_openai_agents._mcp import mcp_annotation_effect

__all__ = [
    "DECLARATION_ATTRIBUTE",
    "DeferringGraph",
    "ReplayFunction",
    "ToolDeclaration",
    "UnknownHandoffTargetError",
    "build_deferring_graph",
    "check_tool_input",
    "check_tool_output",
    "declare_tool_effect",
    "declared_effect",
    "declared_requires_approval",
    "output_text",
    "raising_copy",
    "reachable_agents",
    "replay_recorded_result",
    "resolve_call_policy",
    "tool_call_policy",
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
    return mcp_annotation_effect(tool)


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
    return call_policy(
        turn, tool_name, known=True, declared_effect=effect, declared_approval=requires_approval
    )


async def tool_call_policy(
    turn: AgentTurnContext,
    graph: DeferringGraph,
    run_context: RunContextWrapper[Any],
    agent_name: str,
    raw: ResponseFunctionToolCall,
) -> ResolvedToolPolicy:
    """The policy of one call (``call_policy``): a built-in tool is the session's, and a
    name the agent has no tool of gets the session default."""
    tool = graph.real_tool(agent_name, raw.name)
    if tool is None:
        return call_policy(turn, raw.name, known=False)
    return resolve_call_policy(
        turn,
        raw.name,
        declared_effect(tool),
        await declared_requires_approval(tool, run_context, raw.arguments, raw.call_id),
    )


# --- the deferring agent graph of a model step -------------------------------------
#
# The agent graph a model step runs: the user's agents with every function tool deferred.
#
# Each agent reachable through handoffs is cloned with its function tools (MCP
# tools included) replaced by copies that need approval and, when approved, only
# replay the result the session recorded. So ``Runner.run`` stops before any tool
# runs, and on resume the SDK feeds the recorded results back itself.

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


def replay_recorded_result(turn: AgentTurnContext) -> ReplayFunction:
    """The body of every deferred copy: the result the session recorded for the call."""

    async def replay(context: ToolContext[Any], arguments: str) -> str:
        del arguments
        record = turn.recorded_tool_call(context.tool_call_id)
        if record is None or not record.is_final:
            raise RuntimeError(
                f"tool call {context.tool_call_id!r} has no final record to replay; the SDK"
                " tried to run a deferred tool inside the model step"
            )
        return describe_tool_call_outcome(record)

    return replay


# --- around the tool body in its tool Step -----------------------------------------
#
# A function tool's own input and output guardrails, run in the tool Step around its body.
#
# In the SDK a tripwire ends the whole run; in a session it ends only the call,
# which records ``failed`` with a message the model sees (retrying would trip it
# again). ``reject_content`` before the body means the body never runs, so the
# call fails with the guardrail's message; after the body the call did run, so
# the guardrail's message replaces the output, as the SDK does.


async def check_tool_input(
    tool: FunctionTool, context: ToolContext[Any], agent: Agent[Any]
) -> None:
    """Run the tool's input guardrails; raise ``ToolExecutionError`` when one stops the call."""
    for guardrail in tool.tool_input_guardrails or ():
        verdict = await guardrail.run(ToolInputGuardrailData(context=context, agent=agent))
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            raise ToolExecutionError(
                f"the tool input guardrail {guardrail.get_name()!r} stopped this call"
            )
        if behavior["type"] == "reject_content":
            raise ToolExecutionError(behavior["message"])


async def check_tool_output(
    tool: FunctionTool, context: ToolContext[Any], agent: Agent[Any], output: Any
) -> Any:
    """Run the tool's output guardrails; the output the model should see."""
    for guardrail in tool.tool_output_guardrails or ():
        verdict = await guardrail.run(
            ToolOutputGuardrailData(context=context, agent=agent, output=output)
        )
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            raise ToolExecutionError(
                f"the tool output guardrail {guardrail.get_name()!r} withheld this call's"
                " output; the tool did run"
            )
        if behavior["type"] == "reject_content":
            return behavior["message"]
    return output


def raising_copy(tool: FunctionTool) -> FunctionTool:
    """``tool`` with the SDK's default error-to-text handler off, so failures reach the session.

    A tool's own ``failure_error_function`` is kept: its text becomes the output, as in the SDK.
    """
    if resolve_function_tool_failure_error_function(tool) is not default_tool_error_function:
        return tool
    copy = dataclasses.replace(tool)
    set_function_tool_failure_error_function(copy, None)
    return copy


def output_text(tool: FunctionTool, call: ResponseFunctionToolCall, output: Any) -> str:
    """The tool output as the SDK would send it to the model, as text.

    A typed output was already checked against its type when the tool returned;
    its declared ``output_json_schema`` decides the JSON object text.
    """
    item = ItemHelpers.tool_call_output_item(
        call, output, output_json_schema=tool.output_json_schema
    )
    converted: Any = item["output"]
    if isinstance(converted, str):
        return converted
    parts = cast(list[dict[str, Any]], converted)
    if parts and all(part.get("type") == "input_text" for part in parts):
        # Text-only results (an MCP tool's usual answer) are recorded as their text.
        return "\n".join(str(part.get("text", "")) for part in parts)
    return json.dumps(converted, ensure_ascii=False)
