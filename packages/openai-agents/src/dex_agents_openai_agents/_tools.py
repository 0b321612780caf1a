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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from agents import (
    Agent,
    AgentOutputSchemaBase,
    FunctionTool,
    Handoff,
    ItemHelpers,
    Model,
    ModelProvider,
    ModelRetryAdvice,
    ModelRetryAdviceRequest,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    Tool,
    handoff,
)
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import ModelTracing
from agents.tool import (
    default_tool_error_function,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData
from openai.types.responses import ResponseCompletedEvent, ResponseFunctionToolCall
from openai.types.responses.response_prompt_param import ResponsePromptParam

from dex_agents import ToolEffect
from dex_agents.runner import (
    WRITE_TODOS,
    AgentTurnContext,
    BuiltInToolDefinition,
    ResolvedToolPolicy,
    ToolExecutionError,
    call_policy,
    declared_effect_in,
    describe_tool_call_outcome,
    tool_declaration_metadata,
)
from dex_agents_openai_agents._mcp import mcp_annotation_effect

__all__ = [
    "DECLARATION_ATTRIBUTE",
    "DeferringGraph",
    "GuardedModel",
    "ModelCallGuard",
    "RecordedModelCall",
    "RecordedResultReplay",
    "ReplayFunction",
    "ToolDeclaration",
    "UnknownHandoffTargetError",
    "build_deferring_graph",
    "check_tool_input",
    "check_tool_output",
    "declare_tool_effect",
    "declared_effect",
    "declared_requires_approval",
    "is_offered",
    "output_text",
    "raising_copy",
    "reachable_agents",
    "replay_recorded_result",
    "resolve_call_policy",
    "tool_call_policy",
    "unwrapped_model",
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


_VALUE_TYPES = (str, int, bool, frozenset, type(None))
"""Graph sources compared by value; every other source is compared by identity."""


@dataclass
class DeferringGraph:
    """The cloned graph (``root``) and the real tools, by agent name and tool name."""

    root: Agent[Any]
    real_tools: dict[str, dict[str, FunctionTool]]
    built_in_names: frozenset[str]
    agents: list[Agent[Any]] = field(default_factory=list[Agent[Any]])
    """Keeps every clone alive: handoffs hold only weak references."""
    sources: tuple[object, ...] = ()
    """What the clones were built from: each original agent's field values, the tools its
    ``get_all_tools`` gave, the stubs and built-in tools added, and the planning switch.
    Two graphs whose sources are the same objects (``same_sources``) are the same graph."""

    def same_sources(self, other: DeferringGraph) -> bool:
        """Whether ``other`` was built from the very same agents, tools and options."""
        return len(self.sources) == len(other.sources) and all(
            mine is theirs or (type(mine) in _VALUE_TYPES and mine == theirs)
            for mine, theirs in zip(self.sources, other.sources, strict=True)
        )

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


_HIDDEN_ATTRIBUTE = "dex_agents_not_offered"
"""Marks a tool of a clone that the model call does not offer (see ``GuardedModel``)."""


def _hidden_stub(name: str, real: FunctionTool | None, replay: ReplayFunction) -> FunctionTool:
    """A deferred tool named ``name`` that lets the SDK resolve a call the model made of a tool
    this call did not offer (``real``, in a planning turn) or the agent does not have."""
    if real is not None:
        stub = _deferred_copy(real, replay)
    else:
        stub = FunctionTool(
            name=name,
            description="Not offered in this model call.",
            params_json_schema={"type": "object", "properties": {}, "additionalProperties": True},
            on_invoke_tool=replay,
            strict_json_schema=False,
            needs_approval=True,
        )
    setattr(stub, _HIDDEN_ATTRIBUTE, True)
    return stub


def is_offered(tool: Tool) -> bool:
    """Whether a model call offers ``tool`` (hidden stubs are not offered)."""
    return not getattr(tool, _HIDDEN_ATTRIBUTE, False)


async def build_deferring_graph(
    root: Agent[Any],
    run_context: RunContextWrapper[Any],
    replay: ReplayFunction,
    built_ins: Sequence[BuiltInToolDefinition] = (),
    *,
    handoff_agents: Sequence[Agent[Any]] = (),
    planning: bool = False,
    unoffered_names: Iterable[str] = (),
) -> DeferringGraph:
    """Clone ``root`` and every agent reachable through handoffs, with deferred tools.

    ``handoff_agents`` are the agents that ``Handoff`` objects lead to (see
    ``reachable_agents``). A planning turn's clones offer only ``write_todos`` and no
    handoffs, so the model can only write the plan. ``unoffered_names`` are names the
    model called that a clone does not offer (this turn's records, or the calls of the
    response being replayed): each clone gets a hidden deferred stub of each such name it
    lacks, so the SDK turns the call into an approval interruption like any other (the
    session then rejects it in a planning turn, or fails it as a call of an unknown
    tool) instead of failing the model call with ``ModelBehaviorError``. The stubs are
    never offered to the model (``GuardedModel`` leaves them out).
    """
    originals = reachable_agents(root, handoff_agents)
    offered_built_ins = [
        definition for definition in built_ins if not planning or definition.name == WRITE_TODOS
    ]
    built_in_names = frozenset(definition.name for definition in built_ins)
    extra_names = list(dict.fromkeys(unoffered_names))
    real_tools: dict[str, dict[str, FunctionTool]] = {}
    clones: dict[int, Agent[Any]] = {}
    sources: list[object] = [planning, built_in_names, *built_ins]
    for agent in originals:
        tools: list[Tool] = []
        by_name: dict[str, FunctionTool] = {}
        all_tools = await agent.get_all_tools(run_context)
        sources.extend((agent, len(all_tools), *all_tools))
        sources.extend(getattr(agent, entry.name) for entry in dataclasses.fields(agent))
        sources.extend((len(agent.handoffs), *agent.handoffs))
        for tool in all_tools:
            if isinstance(tool, FunctionTool):
                if tool.name in built_in_names:
                    raise ValueError(
                        f"tool {tool.name!r} of agent {agent.name!r} uses the name of an"
                        " enabled built-in tool"
                    )
                by_name[tool.name] = tool
                if not planning:
                    tools.append(_deferred_copy(tool, replay))
            elif not planning:
                tools.append(tool)  # Hosted and other SDK-run tools are passed through.
        tools.extend(_built_in_tool(definition, replay) for definition in offered_built_ins)
        offered = {getattr(tool, "name", None) for tool in tools}
        handoff_names = set[str]() if planning else _handoff_tool_names(agent)
        stub_names = [
            name for name in extra_names if name not in offered and name not in handoff_names
        ]
        sources.extend((len(stub_names), *stub_names))
        tools.extend(_hidden_stub(name, by_name.get(name), replay) for name in stub_names)
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
        sources=tuple(sources),
    )


def _handoff_tool_names(agent: Agent[Any]) -> set[str]:
    return {
        item.tool_name if isinstance(item, Handoff) else Handoff.default_tool_name(item)
        for item in agent.handoffs
    }


# --- what a model step's calls offer ---------------------------------------------
#
# Every model the step's agents call is wrapped in a ``GuardedModel``: it leaves the hidden
# stubs out of the offered tools, forces the tool choice when the step asks for it, and
# records each response with the tool names it called that the call did not offer. When
# the SDK then fails the run with ``ModelBehaviorError`` (a call of a tool it cannot
# resolve), the runner runs the step again on a graph with a stub of each such name, and
# the guard of that run answers with the recorded responses instead of calling the model.


@dataclass
class RecordedModelCall:
    """One model call's answer: its stream events, or its response when not streamed."""

    events: list[TResponseStreamEvent] = field(default_factory=list[TResponseStreamEvent])
    response: ModelResponse | None = None


class ModelCallGuard:
    """The model calls of one run of a model step, through ``GuardedModel``.

    ``force_tool_choice``: the run's first model call gets ``tool_choice="required"``.
    ``replay``: the recorded calls of an earlier run of the same step, answered in order
    without calling the model.
    """

    def __init__(
        self,
        *,
        force_tool_choice: bool = False,
        replay: Sequence[RecordedModelCall] | None = None,
    ) -> None:
        self.force_tool_choice = force_tool_choice
        self.recorded: list[RecordedModelCall] = []
        self.unoffered: list[str] = []
        """Tool names the model called that its call did not offer, in call order."""
        self._replay = list(replay) if replay is not None else []
        self._calls = 0
        self._replayed_events: set[int] = set()

    def replaying_guard(self) -> ModelCallGuard:
        """A guard that answers this run's calls again, for a rerun of the step."""
        return ModelCallGuard(force_tool_choice=self.force_tool_choice, replay=self.recorded)

    def install(self, run_config: RunConfig, agents: Iterable[Agent[Any]]) -> RunConfig:
        """Wrap every model ``agents`` and ``run_config`` name; returns the run's config."""
        for agent in agents:
            # A clone kept from the turn's previous model step has that step's guard: rewrap.
            inner = unwrapped_model(agent.model)
            if isinstance(inner, Model):
                agent.model = GuardedModel(inner, self)
        model = run_config.model
        if isinstance(model, Model) and not isinstance(model, GuardedModel):
            model = GuardedModel(model, self)
        return dataclasses.replace(
            run_config,
            model=model,
            model_provider=_GuardedProvider(run_config.model_provider, self),
        )

    def next_replayed(self) -> RecordedModelCall | None:
        """The recorded answer of the next call, or ``None`` when the model answers it."""
        if not self._replay:
            return None
        self._calls += 1
        call = self._replay.pop(0)
        self._replayed_events.update(id(event) for event in call.events)
        return call

    def is_replayed(self, event: object) -> bool:
        """Whether a stream event is a recorded one, whose deltas the first run wrote."""
        return id(event) in self._replayed_events

    def start_call(self, model_settings: ModelSettings) -> tuple[RecordedModelCall, ModelSettings]:
        """Record a new call; the settings it is made with."""
        first = self._calls == 0
        self._calls += 1
        call = RecordedModelCall()
        self.recorded.append(call)
        if first and self.force_tool_choice:
            model_settings = model_settings.resolve(ModelSettings(tool_choice="required"))
        return call, model_settings

    def note_output(
        self,
        output: Sequence[Any],
        offered: Sequence[Tool],
        handoffs: Sequence[Handoff[Any, Any]],
        output_schema: AgentOutputSchemaBase | None,
    ) -> None:
        """Note the function calls of ``output`` that name no offered tool or handoff."""
        names = {getattr(tool, "name", None) for tool in offered}
        names.update(item.tool_name for item in handoffs)
        if output_schema is not None:
            names.add("json_tool_call")  # The SDK's own stand-in for a structured answer.
        calls = [item for item in output if isinstance(item, ResponseFunctionToolCall)]
        for call in calls:
            if call.name not in names and call.name not in self.unoffered:
                self.unoffered.append(call.name)


class GuardedModel(Model):
    """A model of a model step's agents; see ``ModelCallGuard``."""

    def __init__(self, inner: Model, guard: ModelCallGuard) -> None:
        self.inner = inner
        self.guard = guard

    @property
    def model(self) -> str | None:
        """The wrapped model's name, when it exposes one."""
        name = getattr(self.inner, "model", None)
        return name if isinstance(name, str) else None

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        replayed = self.guard.next_replayed()
        if replayed is not None:
            if replayed.response is None:
                raise RuntimeError("the rerun of a model step changed from streamed to not")
            return replayed.response
        call, settings = self.guard.start_call(model_settings)
        offered = [tool for tool in tools if is_offered(tool)]
        response = await self.inner.get_response(
            system_instructions,
            input,
            settings,
            offered,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        call.response = response
        self.guard.note_output(response.output, offered, handoffs, output_schema)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        replayed = self.guard.next_replayed()
        if replayed is not None:
            for event in replayed.events:
                yield event
            return
        call, settings = self.guard.start_call(model_settings)
        offered = [tool for tool in tools if is_offered(tool)]
        async for event in self.inner.stream_response(
            system_instructions,
            input,
            settings,
            offered,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        ):
            call.events.append(event)
            if isinstance(event, ResponseCompletedEvent):
                self.guard.note_output(event.response.output, offered, handoffs, output_schema)
            yield event


class _GuardedProvider(ModelProvider):
    """Wraps each model a name resolves to (``RunConfig.model_provider``)."""

    def __init__(self, inner: ModelProvider, guard: ModelCallGuard) -> None:
        self.inner = inner
        self.guard = guard

    def get_model(self, model_name: str | None) -> Model:
        model = self.inner.get_model(model_name)
        return model if isinstance(model, GuardedModel) else GuardedModel(model, self.guard)

    async def aclose(self) -> None:
        await self.inner.aclose()


def unwrapped_model(model: str | Model | None) -> str | Model | None:
    """``model`` without its ``GuardedModel``."""
    return model.inner if isinstance(model, GuardedModel) else model


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


class RecordedResultReplay:
    """The body of every deferred copy: the result the session recorded for the call, in
    the records of ``turn`` (the model step's context; a graph kept for the next model
    step of the turn gets that step's context here)."""

    def __init__(self, turn: AgentTurnContext) -> None:
        self.turn = turn

    async def __call__(self, context: ToolContext[Any], arguments: str) -> str:
        del arguments
        record = self.turn.recorded_tool_call(context.tool_call_id)
        if record is None or not record.is_final:
            raise RuntimeError(
                f"tool call {context.tool_call_id!r} has no final record to replay; the SDK"
                " tried to run a deferred tool inside the model step"
            )
        return describe_tool_call_outcome(record)


def replay_recorded_result(turn: AgentTurnContext) -> RecordedResultReplay:
    """The body of every deferred copy: the result the session recorded for the call."""
    return RecordedResultReplay(turn)


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
