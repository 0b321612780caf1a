"""``OpenAIAgentsRunner``: an OpenAI Agents SDK ``Agent`` as a dex-agents runner.

A model step runs the agent with every function tool deferred (see
``build_deferring_graph``), so ``Runner.run`` makes one model call and stops at the tool
calls' approval interruptions. The step returns those calls to the session and
keeps the SDK's ``RunState`` as the framework run state. The next step restores
it, approves every call whose record succeeded or failed (the deferred copy then
replays the recorded result) and rejects every rejected call with its message,
and runs on. Tools themselves run only in ``execute_deferred_tool_call``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelBehaviorError,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    Runner,
    RunState,
    ToolApprovalItem,
)
from agents.items import ModelResponse, TResponseInputItem
from agents.result import RunResultStreaming
from agents.tool import (
    invoke_function_tool,
)
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall

from dex_agents import AgentUsage
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskForwarding,
    TurnCompleted,
    check_model_tool_call_id,
    check_planning_tool_choice,
    context_summary_note,
    describe_tool_call_outcome,
    enabled_builtin_tool_definitions,
    estimate_stored_tokens,
    forced_tool_choice_refusal,
    is_anthropic_model,
    model_call_metadata,
    returning_started_task,
    serving_deferred_tool_execution,
    serving_model_step,
    single_response_usage,
    thinking_enabled,
    unknown_tool_error,
)
from dex_agents.stepwise import DEFAULT_MAX_MODEL_CALLS_PER_TURN
from dex_agents.values import (
    AgentToolCallStatus,
    FrameworkMessage,
    InteractionMode,
    add_agent_usage,
    empty_agent_usage,
)
from dex_agents_openai_agents._compaction import compaction_cutoff, summarizer_of, summary_input
from dex_agents_openai_agents._mcp import stamp_mcp_idempotency_keys
from dex_agents_openai_agents._messages import (
    InputItem,
    StepRunState,
    call_names,
    decode_run_state,
    encode_run_state,
    framework_message_of,
    replay_items,
    stored_item,
    user_input_item,
)
from dex_agents_openai_agents._tools import (
    DeferringGraph,
    ModelCallGuard,
    RecordedResultReplay,
    build_deferring_graph,
    check_tool_input,
    check_tool_output,
    output_text,
    raising_copy,
    reachable_agents,
    replay_recorded_result,
    tool_call_policy,
    unwrapped_model,
)

__all__ = [
    "ContextFactory",
    "OpenAIAgentsRunner",
    "PlanningToolChoice",
    "ResolveModel",
    "UnsupportedInterruptionError",
    "check_forced_tool_choice",
]

_log = logging.getLogger(__name__)

ContextFactory = Callable[[], Any]
"""Builds the SDK run context value (``RunContextWrapper.context``) for one step."""

ResolveModel = Callable[[Mapping[str, Any]], "str | Model | None"]
"""Maps a turn's session settings to the model of its model calls (``RunConfig.model``), or
``None`` for the agents' own models."""

PlanningToolChoice = Literal["auto", "required"]


class UnsupportedInterruptionError(RuntimeError):
    """The SDK stopped for an approval this adapter cannot defer (not a function call)."""


class OpenAIAgentsRunner(ToolTaskForwarding):
    """Runs ``agent`` under the session Flow.

    What it keeps between calls is only a shortcut: the live ``RunState`` a model step
    stopped with, which the turn's next model step in this Worker resumes instead of
    restoring the same state from its committed JSON (``_ResumeCache``); a restart or
    another Worker restores from the JSON, with the same result.

    ``run_config`` is the base ``RunConfig`` of every run (model provider, model
    settings, ...). Tracing is off unless ``tracing=True``: the SDK would
    otherwise export traces to OpenAI. ``context_factory`` builds the run
    context value given to tools, instructions and guardrails in each step.
    ``max_turns`` bounds the model calls of one session turn (the SDK's ``max_turns``,
    carried across the turn's model steps in its run state): past it the SDK raises
    ``MaxTurnsExceeded`` and the turn fails, so a model that keeps calling tools cannot
    run forever. It defaults to Stepwise's ``max_model_calls_per_turn`` (100), not the
    SDK's 10, because every tool round of a session turn is a model call; ``None``
    removes the bound. ``handoff_agents`` lists the agents that ``handoff(...)`` objects
    lead to and that no agent lists directly in its ``handoffs`` (the SDK tells a
    ``Handoff``'s target only by name); a handoff to an agent found nowhere is a
    ``ValueError`` naming it.
    """

    supports_plan_mode = True
    """A planning turn's agent offers only ``write_todos``, with no handoffs."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        run_config: RunConfig | None = None,
        context_factory: ContextFactory | None = None,
        tracing: bool = False,
        max_turns: int | None = DEFAULT_MAX_MODEL_CALLS_PER_TURN,
        handoff_agents: Sequence[Agent[Any]] = (),
        planning_tool_choice: PlanningToolChoice = "auto",
        resolve_model: ResolveModel | None = None,
    ) -> None:
        if not isinstance(agent, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"agent must be an agents.Agent, got {type(agent).__name__}")
        for extra in handoff_agents:
            if not isinstance(extra, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    f"handoff_agents must hold agents.Agent objects, got {type(extra).__name__}"
                )
        if run_config is not None and not isinstance(run_config, RunConfig):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("run_config must be an agents.RunConfig")
        if context_factory is not None and not callable(context_factory):
            raise TypeError("context_factory must be callable")
        if not isinstance(tracing, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tracing must be a bool, got {tracing!r}")
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(f"max_turns must be a positive integer or None, got {max_turns!r}")
        if planning_tool_choice not in ("auto", "required"):
            raise ValueError(
                f"planning_tool_choice must be 'auto' or 'required', got {planning_tool_choice!r}"
            )
        if resolve_model is not None and not callable(resolve_model):
            raise TypeError("resolve_model must be a function of the session settings")
        self.agent = agent
        self.handoff_agents = tuple(handoff_agents)
        reachable_agents(agent, self.handoff_agents)  # Names and handoff targets, checked early.
        self.max_turns = max_turns
        self.run_config = dataclasses.replace(
            run_config if run_config is not None else RunConfig(),
            tracing_disabled=not tracing,
            # "return_error_to_model" would answer the call and make a second model call in
            # the step; the runner hands such calls to the session instead.
            tool_not_found_behavior="raise_error",
        )
        self.context_factory = context_factory
        self.planning_tool_choice: PlanningToolChoice = planning_tool_choice
        self.resolve_model = resolve_model
        self._resume_cache = _ResumeCache()
        if planning_tool_choice == "required":
            check_forced_tool_choice(agent, self.handoff_agents, self.run_config)

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return framework_message_of(user_input_item(text))

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Outputs of the stored calls whose records are final but not stored yet."""
        items = [stored_item(message) for message in turn.messages]
        answered = {
            item.get("call_id") for item in items if item.get("type") == "function_call_output"
        }
        messages: list[FrameworkMessage] = []
        for item in items:
            call_id = item.get("call_id")
            if item.get("type") != "function_call" or call_id in answered:
                continue
            record = turn.recorded_tool_call(str(call_id))
            if record is not None and record.is_final:
                messages.append(
                    framework_message_of(
                        {
                            "call_id": call_id,
                            "output": describe_tool_call_outcome(record),
                            "type": "function_call_output",
                        },
                        {str(call_id): record.tool_name},
                    )
                )
        return messages

    # --- the model step ------------------------------------------------------------

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        with serving_model_step(turn):
            return await self._run_model_step(turn)

    async def _run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        run_config = self.run_config_for(turn.session_settings)
        guard = ModelCallGuard(force_tool_choice=self._forces_tool_choice(turn, run_config))
        # Names of this turn's calls: a resumed planning turn (or a call of a tool the agent
        # lacks) needs a stub of the name to take the call's recorded result.
        called = [record.tool_name for record in turn.tool_calls]
        try:
            return await self._run_step(turn, run_config, guard, called)
        except ModelBehaviorError:
            if not guard.unoffered:
                raise
        # The model called tools its call did not offer (another tool in a planning turn, or
        # one the agent does not have): the SDK cannot resolve those calls, so run the step
        # again with a stub of each name, answering with the recorded response. The session
        # then rejects or fails those calls as the contract says.
        return await self._run_step(
            turn, run_config, guard.replaying_guard(), [*called, *guard.unoffered]
        )

    async def _run_step(
        self,
        turn: AgentTurnContext,
        run_config: RunConfig,
        guard: ModelCallGuard,
        unoffered_names: Sequence[str],
    ) -> AgentTurnOutcome:
        context_value = self.context_factory() if self.context_factory is not None else None
        run_context = RunContextWrapper(context=context_value)
        replay = replay_recorded_result(turn)
        graph = await build_deferring_graph(
            self.agent,
            run_context,
            replay,
            enabled_builtin_tool_definitions(turn.enabled_built_in_tools),
            handoff_agents=self.handoff_agents,
            planning=turn.interaction_mode is InteractionMode.PLANNING,
            unoffered_names=unoffered_names,
        )
        if turn.framework_run_state is None:
            items = replay_items(turn.messages)
            if turn.context_summary is not None:
                # The summary of the earlier messages leads the input as a user message.
                items.insert(0, user_input_item(context_summary_note(turn.context_summary)))
            run_input: list[TResponseInputItem] | RunState[Any, Agent[Any]] = cast(
                list[TResponseInputItem], items
            )
            stored_count = len(items)
            earlier_responses = 0
        else:
            kept = self._resume_cache.take(turn.flow_id, turn.turn_id, turn.framework_run_state)
            if kept is not None and kept.graph.same_sources(graph):
                # The live state this Worker wrote that very text from, on its own graph,
                # now replaying this step's records (see _ResumeCache).
                graph = kept.graph
                kept.replay.turn = turn
                replay = kept.replay
                state = kept.state
                stored_count = kept.stored_item_count
                earlier_responses = kept.model_response_count
            else:
                saved = decode_run_state(turn.framework_run_state)
                state = await RunState.from_json(
                    graph.root, saved.run_state, context_override=run_context
                )
                stored_count = saved.stored_item_count
                earlier_responses = saved.model_response_count
            _apply_records(state, turn)
            run_input = state
        guarded_config = guard.install(run_config, graph.agents)

        result = Runner.run_streamed(
            graph.root,
            run_input,
            context=context_value,
            # A resumed run keeps the bound and the count of its run state.
            max_turns=self.max_turns,
            run_config=guarded_config,
        )
        # A rerun answers with the recorded response, whose deltas the first run wrote.
        await _forward_stream(result, turn, skip=guard.is_replayed)

        all_items = cast(list[InputItem], result.to_input_list())
        if len(all_items) < stored_count:
            raise RuntimeError(
                f"the SDK's input list has {len(all_items)} items but {stored_count} are stored;"
                " the run state does not match the stored messages"
            )
        names = call_names(all_items)
        new_messages = [framework_message_of(item, names) for item in all_items[stored_count:]]
        responses = result.raw_responses[earlier_responses:]
        usage = _usage_of(responses)
        metadata = model_call_metadata(
            request_model=_model_name(result.last_agent, run_config),
            response_id=responses[-1].response_id if responses else None,
        )
        if not result.interruptions:
            return TurnCompleted(
                new_messages=new_messages, usage=usage, model_call_metadata=metadata
            )
        # A resumed run's wrapper is the restored one (the JSON's or the kept state's).
        policy_context = run_context if isinstance(run_input, list) else result.context_wrapper
        calls = await self._deferred_calls(
            turn, graph, policy_context, result.interruptions, all_items
        )
        state_now = result.to_state()
        saved_state = StepRunState(
            run_state=state_now.to_json(),
            stored_item_count=len(all_items),
            model_response_count=len(result.raw_responses),
        )
        encoded = encode_run_state(saved_state)
        self._resume_cache.put(
            turn.flow_id,
            turn.turn_id,
            encoded,
            _ResumedState(
                state=state_now,
                graph=graph,
                replay=replay,
                stored_item_count=saved_state.stored_item_count,
                model_response_count=saved_state.model_response_count,
            ),
        )
        return ToolCallsRequested(
            framework_run_state=encoded,
            tool_calls=calls,
            usage=usage,
            new_messages=new_messages,
            model_call_metadata=metadata,
        )

    def run_config_for(self, session_settings: Mapping[str, Any]) -> RunConfig:
        """The ``RunConfig`` of a model call under ``session_settings``: the runner's, with
        ``resolve_model``'s model as ``RunConfig.model`` when it names one."""
        config = self.run_config
        if self.resolve_model is not None:
            model = self.resolve_model(session_settings)
            if model is not None:
                if not isinstance(model, str | Model) or model == "":  # pyright: ignore[reportUnnecessaryIsInstance]
                    raise TypeError(
                        "resolve_model must return a model name, an agents.Model or None,"
                        f" got {type(model).__name__}"
                    )
                config = dataclasses.replace(config, model=model)
        return config

    def _forces_tool_choice(self, turn: AgentTurnContext, run_config: RunConfig) -> bool:
        """``required`` on a planning turn's first model call while no draft exists; a model
        ``resolve_model`` chose is checked here, the others when the runner was built."""
        draft = turn.plan is not None and turn.plan.status == "draft"
        forced = (
            self.planning_tool_choice == "required"
            and turn.interaction_mode is InteractionMode.PLANNING
            and turn.framework_run_state is None
            and not draft
        )
        if forced and run_config is not self.run_config:
            check_forced_tool_choice(self.agent, self.handoff_agents, run_config)
        return forced

    # --- compaction ----------------------------------------------------------------

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The Agents SDK counts no tokens before a request, so this estimates one token per
        four characters of the stored items' JSON and the summary."""
        return estimate_stored_tokens(turn.messages, turn.context_summary)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """A cut where every ``function_call`` before it has its output. Only at a turn's
        first model call: later calls continue from the SDK's ``RunState``, which carries
        the turn's whole input, so compacting then would not shrink it."""
        if turn.framework_run_state is not None:
            return None
        return compaction_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One run of a tool-less agent on the agent's model and settings, with
        ``CONTEXT_SUMMARY_INSTRUCTIONS``, over the earlier summary and the messages; the
        model ``resolve_model`` chooses for the request's session settings, when it does."""
        summarizer = summarizer_of(self.agent)
        run_config = self.run_config_for(request.session_settings)
        result = await Runner.run(
            summarizer, summary_input(request), max_turns=1, run_config=run_config
        )
        return ContextSummaryResult(
            summary=str(result.final_output),
            usage=_usage_of(result.raw_responses),
            model_call_metadata=model_call_metadata(
                request_model=_model_name(summarizer, run_config),
                response_id=result.raw_responses[-1].response_id if result.raw_responses else None,
            ),
        )

    async def _deferred_calls(
        self,
        turn: AgentTurnContext,
        graph: DeferringGraph,
        run_context: RunContextWrapper[Any],
        interruptions: Sequence[ToolApprovalItem],
        all_items: Sequence[InputItem],
    ) -> list[DeferredToolCall]:
        by_call_id: dict[str, ToolApprovalItem] = {}
        for item in interruptions:
            call = _function_call_of(item)
            by_call_id[call.call_id] = item
        # The model's order, as the session wants it, from the function call items.
        order = list(
            dict.fromkeys(
                [
                    str(item["call_id"])
                    for item in all_items
                    if item.get("type") == "function_call" and item.get("call_id") in by_call_id
                ]
                + list(by_call_id)
            )
        )
        calls: list[DeferredToolCall] = []
        for call_id in order:
            approval = by_call_id[call_id]
            raw = _function_call_of(approval)
            check_model_tool_call_id(raw.name, call_id)
            agent_name = approval.agent.name
            calls.append(
                DeferredToolCall(
                    tool_call_id=call_id,
                    tool_name=raw.name,
                    arguments=raw.arguments,
                    policy=await tool_call_policy(turn, graph, run_context, agent_name, raw),
                    tool_source_reference=json.dumps({"agent": agent_name}),
                )
            )
        return calls

    # --- the tool step -------------------------------------------------------------

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        # A tool that raised StartedToolTask hands its task to the session's PollToolTask.
        return await returning_started_task(self._run_deferred_tool_call(call))

    async def _run_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        record = call.tool_call
        context_value = self.context_factory() if self.context_factory is not None else None
        run_context = RunContextWrapper(context=context_value)
        agent, tool = await self._real_tool(
            record.tool_source_reference, record.tool_name, run_context
        )
        tool_call = ResponseFunctionToolCall(
            arguments=record.arguments,
            call_id=record.tool_call_id,
            name=record.tool_name,
            type="function_call",
        )
        tool_context = ToolContext(
            context=context_value,
            usage=Usage(),
            tool_name=record.tool_name,
            tool_call_id=record.tool_call_id,
            tool_arguments=record.arguments,
            tool_call=tool_call,
            agent=agent,
            run_config=self.run_config,
        )
        with serving_deferred_tool_execution(call):
            await check_tool_input(tool, tool_context, agent)
            try:
                output = await invoke_function_tool(
                    function_tool=raising_copy(tool),
                    context=tool_context,
                    arguments=record.arguments,
                )
            except ModelBehaviorError as error:
                # The SDK's argument check: the model sent arguments the schema rejects.
                raise ToolExecutionError(str(error)) from error
            if not isinstance(output, ToolInputRequested):
                output = await check_tool_output(tool, tool_context, agent, output)
        if isinstance(output, ToolInputRequested):
            return output
        return ToolExecutionResult(output_text(tool, tool_call, output))

    async def _real_tool(
        self, source_reference: str | None, tool_name: str, run_context: RunContextWrapper[Any]
    ) -> tuple[Agent[Any], FunctionTool]:
        agent_name: str | None = None
        if source_reference:
            try:
                agent_name = json.loads(source_reference).get("agent")
            except (json.JSONDecodeError, AttributeError):
                agent_name = None
        for agent in _agents_by_name(self.agent, self.handoff_agents, agent_name):
            for tool in await agent.get_all_tools(run_context):
                if isinstance(tool, FunctionTool) and tool.name == tool_name:
                    stamp_mcp_idempotency_keys(agent)
                    return agent, tool
        raise ToolExecutionError(unknown_tool_error(tool_name))


# --- the live run state kept for the next model step ---------------------------------
#
# The live ``RunState`` a model step leaves for the turn's next model step, in this Worker.
#
# A model step that stops at tool calls stores its ``RunState`` as JSON (the turn's
# ``framework_run_state``), and the next model step restores it with ``RunState.from_json``,
# which re-validates the whole run (every item and tool invocation of the turn's input) and
# costs more the longer the history is. When the next step runs in the same Worker, this
# keeps the state object that JSON was written from, with the agent graph it belongs to,
# and the next step resumes that object instead (the SDK's own ``result.to_state()`` resume
# path).
#
# An entry is served only for the exact committed text it was written as (same flow, turn
# and ``framework_run_state``), only once (resuming changes the state), and only when the
# next step's graph comes from the very same agents, tools and options; anything else (a
# restart, another Worker, a rerun of a step, changed tools) restores from the JSON, which
# is what the entry was written to equal.

_RESUME_CACHE_ENTRIES = 32
"""Sessions waiting between a model step and the next whose states are kept (one each, the
latest); the least recently written go first."""


@dataclasses.dataclass(frozen=True)
class _ResumedState:
    """A model step's live run state and the graph its agents belong to."""

    state: RunState[Any, Agent[Any]]
    graph: DeferringGraph
    replay: RecordedResultReplay
    stored_item_count: int
    model_response_count: int


class _ResumeCache:
    """One live run state per session flow, with the turn and the ``framework_run_state``
    text it was written as."""

    def __init__(self, max_entries: int = _RESUME_CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, str, _ResumedState]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, flow_id: str, turn_id: str, encoded: str, entry: _ResumedState) -> None:
        """Keep ``entry`` for the step that resumes ``encoded``, in place of the flow's
        earlier one; past the bound the least recently written flows' entries go."""
        if self.max_entries <= 0:
            return
        self._entries[flow_id] = (turn_id, encoded, entry)
        self._entries.move_to_end(flow_id)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def take(self, flow_id: str, turn_id: str, encoded: str) -> _ResumedState | None:
        """The flow's entry if it was written as ``encoded`` in this turn, else ``None``;
        either way the flow's entry is gone (a state is resumed once)."""
        kept = self._entries.pop(flow_id, None)
        if kept is None or kept[0] != turn_id or kept[1] != encoded:
            return None
        return kept[2]

    def clear(self) -> None:
        """Forget every entry (the next steps restore from the JSON)."""
        self._entries.clear()


def _agents_by_name(
    root: Agent[Any], handoff_agents: Sequence[Agent[Any]], preferred: str | None
) -> list[Agent[Any]]:
    """Every agent reachable through handoffs, the one named ``preferred`` first."""
    ordered = reachable_agents(root, handoff_agents)
    ordered.sort(key=lambda agent: agent.name != preferred)
    return ordered


def _function_call_of(item: ToolApprovalItem) -> ResponseFunctionToolCall:
    raw: object = item.raw_item
    if isinstance(raw, ResponseFunctionToolCall):
        return raw
    fields: dict[str, Any] | None = raw if isinstance(raw, dict) else None  # pyright: ignore[reportUnknownVariableType]
    if fields is not None and fields.get("type") == "function_call":
        return ResponseFunctionToolCall.model_validate(fields)
    kind = fields.get("type") if fields is not None else getattr(raw, "type", type(raw).__name__)
    raise UnsupportedInterruptionError(
        f"the SDK asked to approve a {kind!r} item; only function tool calls can be deferred"
    )


def _apply_records(state: RunState[Any, Agent[Any]], turn: AgentTurnContext) -> None:
    """Approve the succeeded pending calls and reject the others, from their final records.

    Only an approved call runs its replay copy, which returns the recorded output;
    a rejection gives the model the record's text as the call's output directly,
    which keeps failure texts away from a typed tool's output check.
    """
    for item in state.get_interruptions():
        call = _function_call_of(item)
        record = turn.recorded_tool_call(call.call_id)
        if record is None or not record.is_final:
            raise RuntimeError(
                f"tool call {call.call_id!r} of the previous response has no final record"
            )
        if record.status is AgentToolCallStatus.SUCCEEDED:
            state.approve(item)
        else:
            state.reject(item, rejection_message=describe_tool_call_outcome(record))


async def _forward_stream(
    result: RunResultStreaming,
    turn: AgentTurnContext,
    *,
    skip: Callable[[object], bool] = lambda event: False,
) -> None:
    """Consume the run's events, writing text and reasoning deltas to the turn's events
    (those of the model's events that ``skip`` does not name).

    If the step is cancelled (or the consumer fails), the SDK's background run is
    cancelled too, so no model call outlives the step.
    """
    try:
        async for event in result.stream_events():
            if event.type != "raw_response_event" or skip(event.data):
                continue
            data: Any = event.data
            kind = getattr(data, "type", None)
            if kind == "response.output_text.delta":
                turn.events.write_text_delta(str(data.delta))
            elif kind == "response.reasoning_summary_text.delta":
                turn.events.write_reasoning_delta(str(data.delta))
    except BaseException:
        result.cancel()
        raise


def _usage_of(responses: Sequence[ModelResponse]) -> AgentUsage:
    """Usage of this step's own responses, never the run's running totals."""
    total = empty_agent_usage()
    for response in responses:
        usage = response.usage
        input_details: Any = usage.input_tokens_details
        output_details: Any = usage.output_tokens_details
        total = add_agent_usage(
            total,
            single_response_usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                cache_read_tokens=getattr(input_details, "cached_tokens", None),
                cache_write_tokens=getattr(input_details, "cache_write_tokens", None),
                reasoning_tokens=getattr(output_details, "reasoning_tokens", None),
            ),
        )
    return total


def _model_name(agent: Agent[Any], run_config: RunConfig) -> str | None:
    for model in (unwrapped_model(run_config.model), unwrapped_model(agent.model)):
        if isinstance(model, str):
            return model
        name = getattr(model, "model", None)
        if isinstance(name, str):
            return name
    return None


# --- models that refuse a forced tool choice ------------------------------------------


def _extended_thinking(model_name: str | None, settings: ModelSettings) -> bool:
    """Whether ``settings`` turn Anthropic extended thinking on for a Claude model: a
    ``thinking`` entry in ``extra_body`` or ``extra_args``, or a reasoning effort, which
    LiteLLM sends to Claude as thinking."""
    if not is_anthropic_model(model_name):
        return False
    effort = settings.reasoning.effort if settings.reasoning is not None else None
    if effort not in (None, "none"):
        return True
    return any(
        thinking_enabled(cast(Mapping[str, Any], extra))
        for extra in (settings.extra_body, settings.extra_args)
        if isinstance(extra, Mapping)
    )


def check_forced_tool_choice(
    root: Agent[Any], handoff_agents: Sequence[Agent[Any]], run_config: RunConfig
) -> None:
    """Raise ``ValueError`` when an agent's model would refuse the forced tool choice of
    ``planning_tool_choice="required"`` (``dex_agents.runner.forced_tool_choice_refusal``)."""
    for agent in reachable_agents(root, handoff_agents):
        model = unwrapped_model(run_config.model) or unwrapped_model(agent.model)
        found = model if isinstance(model, str) else getattr(model, "model", None)
        name = found if isinstance(found, str) else None
        settings = agent.model_settings.resolve(run_config.model_settings)
        check_planning_tool_choice(
            "required",
            forced_tool_choice_refusal(name, extended_thinking=_extended_thinking(name, settings)),
            where=f"agent {agent.name!r}",
        )
