"""``StepwiseRunner``: the built-in agent loop as an ``AgentFrameworkRunner``, and the
``AgentDefinition`` it runs (a Stepwise agent declared in Dex terms, without a framework).

Each ``run_model_step`` makes at most one model call, built from committed state
only: the instructions, the stored transcript, and the results of the previous
response from the turn's final records. The transcript is stored as the turn
goes (``ToolCallsRequested.new_messages``), so the run state is just the turn's
model call count.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from dex_agents._compaction import CompactionPolicy
from dex_agents.models import (
    ModelClient,
    ModelRequest,
    ModelSettings,
    ModelToolCall,
    ModelToolDefinition,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
)
from dex_agents.models._types import model_forced_tool_choice_refusal
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    WRITE_TODOS,
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    SupportsToolTasks,
    ToolCallsRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    TurnCompleted,
    build_plan_note,
    call_policy,
    check_planning_tool_choice,
    describe_tool_call_outcome,
    enabled_builtin_tool_definitions,
    known_tool,
    model_call_limit_result,
    summarized_through,
    validate_built_in_tool_names,
)
from dex_agents.stepwise._compaction import (
    estimate_request_tokens,
    select_cut,
    summary_note,
    trim_summary_items,
)
from dex_agents.stepwise._mcp import (
    ToolSource,
    decode_source_reference,
    encode_source_reference,
)
from dex_agents.stepwise._messages import (
    decode_run_state,
    decode_transcript,
    encode_run_state,
    model_output_messages,
    pair_tool_calls_with_results,
    tool_result_message,
    unanswered_tool_calls,
    user_text_message,
)
from dex_agents.stepwise._tools import FunctionTool, ToolCallContext
from dex_agents.values import (
    AgentPlan,
    AgentToolCall,
    FrameworkMessage,
    InteractionMode,
    ToolEffect,
)

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "AgentDefinition",
    "InstructionContext",
    "Instructions",
    "StepwiseRunner",
]

logger = logging.getLogger(__name__)

# --- the agent definition ----------------------------------------------------------

DEFAULT_MAX_MODEL_CALLS_PER_TURN = 100
DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True, kw_only=True)
class InstructionContext:
    """What an instructions function sees; it runs in every ``RunModel``."""

    flow_id: str
    turn_id: str
    attempt: int
    interaction_mode: str = "chat"
    plan: AgentPlan | None = None
    session_settings: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    """The turn's session settings (``{}`` for none)."""


Instructions = str | Callable[[InstructionContext], "str | Awaitable[str]"]


def _no_policies() -> dict[str, ToolPolicy]:
    return {}


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """A Stepwise agent: instructions, a model client and its tools.

    ``tool_policies`` win over a function tool's own effect and approval.
    After ``max_model_calls_per_turn`` model calls in one turn, the next call
    offers no tools; if the model still asks for tools, the turn ends and each
    call gets ``model_call_limit_result``.
    """

    name: str
    instructions: Instructions
    model: ModelClient
    model_settings: ModelSettings | None = None
    tools: Sequence[FunctionTool] = ()
    tool_sources: Sequence[ToolSource] = ()
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=_no_policies)
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    built_in_tools: Sequence[str] = ()
    max_model_calls_per_turn: int = DEFAULT_MAX_MODEL_CALLS_PER_TURN
    interrupt_deadline: timedelta | None = None
    event_stream_capacity_bytes: int | None = None
    tool_source_listing_timeout: timedelta = DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT
    resolve_model: Callable[[Mapping[str, Any]], ModelClient] | None = None
    """Maps the turn's session settings to the ``ModelClient`` of each model call,
    summary calls and token estimates included; choose only among clients the Worker
    built, because the settings come from the application."""
    compaction: CompactionPolicy | None = None
    """Summarize earlier messages before the input passes the context window."""
    plan_mode_enabled: bool = False
    planning_tool_choice: Literal["auto", "required"] = "auto"
    """``required`` forces ``write_todos`` on a planning turn's first model call while no
    draft exists. With ``plan_mode_enabled`` the definition refuses it (``ValueError``)
    for a model that refuses a forced tool choice (Claude Opus 5.5 and Sonnet 5.5, or
    Anthropic extended thinking in ``model_settings``); a model ``resolve_model`` chooses
    is checked when a turn forces the call, which then fails with that error."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("AgentDefinition.name must be a non-blank string")
        if not isinstance(self.instructions, str) and not callable(self.instructions):
            raise TypeError("AgentDefinition.instructions must be a string or a function")
        model: Any = self.model
        if not callable(getattr(model, "generate", None)):
            raise TypeError("AgentDefinition.model must be a ModelClient (with generate)")
        if self.resolve_model is not None and not callable(self.resolve_model):
            raise TypeError("AgentDefinition.resolve_model must be a function of the settings")
        if (
            isinstance(self.max_model_calls_per_turn, bool)
            or not isinstance(self.max_model_calls_per_turn, int)  # pyright: ignore[reportUnnecessaryIsInstance]
            or self.max_model_calls_per_turn < 1
        ):
            raise ValueError("AgentDefinition.max_model_calls_per_turn must be a positive integer")
        if self.model_settings is not None and not isinstance(self.model_settings, ModelSettings):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("AgentDefinition.model_settings must be ModelSettings or None")
        timeout: object = self.tool_source_listing_timeout
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                "AgentDefinition.tool_source_listing_timeout must be a positive timedelta"
            )
        for name in ("tools", "tool_sources", "built_in_tools"):
            value: object = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(f"AgentDefinition.{name} must be a list or tuple")
        if not isinstance(self.tool_policies, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("AgentDefinition.tool_policies must be a mapping of name to ToolPolicy")
        built_ins = validate_built_in_tool_names(self.built_in_tools)
        if self.planning_tool_choice not in ("auto", "required"):
            raise ValueError("AgentDefinition.planning_tool_choice must be 'auto' or 'required'")
        if self.plan_mode_enabled and "write_todos" not in built_ins:
            raise ValueError(
                "AgentDefinition.plan_mode_enabled needs 'write_todos' in built_in_tools"
            )
        if self.plan_mode_enabled:
            # The model of every session without resolve_model's choice; a resolved model
            # is checked when a turn forces the call (StepwiseRunner.run_model_step).
            check_planning_tool_choice(
                self.planning_tool_choice,
                model_forced_tool_choice_refusal(self.model, self.model_settings),
                where=f"AgentDefinition {self.name!r}",
            )
        names: set[str] = set()
        for tool in self.tools:
            if not isinstance(tool, FunctionTool):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"AgentDefinition.tools holds {tool!r}, not a FunctionTool")
            if tool.name in names:
                raise ValueError(f"two function tools are named {tool.name}")
            if tool.name in built_ins:
                raise ValueError(f"tool {tool.name} uses the name of an enabled built-in tool")
            names.add(tool.name)
        source_names: set[str] = set()
        for source in self.tool_sources:
            source_name: object = getattr(source, "source_name", None)
            if not isinstance(source_name, str) or not callable(
                getattr(source, "list_tools", None)
            ):
                raise TypeError(
                    f"AgentDefinition.tool_sources holds {source!r}, not a ToolSource "
                    "(a source_name and list_tools)"
                )
            if source.source_name in source_names:
                raise ValueError(f"two tool sources are named {source.source_name!r}")
            source_names.add(source.source_name)
        for name in self.tool_policies:
            if name in built_ins:
                raise ValueError(f"built-in tool {name} has a fixed policy; remove its ToolPolicy")


# --- the runner --------------------------------------------------------------------


class _EventSink:
    """Writes the model's streamed deltas to the turn's ``AgentEvents``."""

    def __init__(self, events: AgentEventWriter) -> None:
        self._events = events

    async def text_delta(self, text: str) -> None:
        self._events.write_text_delta(text)

    async def reasoning_delta(self, text: str) -> None:
        self._events.write_reasoning_delta(text)


@dataclass(frozen=True)
class _SourceTool:
    source: ToolSource
    definition: ModelToolDefinition


@dataclass(frozen=True)
class _OfferedTools:
    """What one model call offers: the tool sources' tools by name, and every definition in
    offer order (function tools, then listed tools, then built-in tools)."""

    source_tools: dict[str, _SourceTool]
    definitions: tuple[ModelToolDefinition, ...]


class StepwiseRunner:
    """Runs an ``AgentDefinition`` under the session Flow; keeps no state between calls."""

    supports_plan_mode = True
    """A planning turn offers the model only ``write_todos``."""

    def __init__(self, definition: AgentDefinition) -> None:
        self.definition = definition
        self._tools: dict[str, FunctionTool] = {tool.name: tool for tool in definition.tools}
        self._sources: dict[str, ToolSource] = {
            source.source_name: source for source in definition.tool_sources
        }
        # Only for token estimates, which must not list (no I/O before compaction).
        self._last_listings: dict[str, tuple[ModelToolDefinition, ...]] = {}

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_text_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's final records that are not stored yet."""
        items = decode_transcript(turn.messages)
        return [tool_result_message(result) for result in self._new_results(items, turn)]

    # --- the model step ------------------------------------------------------------

    def model_for(self, session_settings: Mapping[str, Any]) -> ModelClient:
        """The model client of a call under ``session_settings``: ``resolve_model``'s choice,
        else the definition's model."""
        resolve = self.definition.resolve_model
        if resolve is None:
            return self.definition.model
        model = resolve(session_settings)
        if not callable(getattr(model, "generate", None)):
            raise TypeError("AgentDefinition.resolve_model must return a ModelClient")
        return model

    async def _model_request(
        self, turn: AgentTurnContext, *, list_sources: bool
    ) -> tuple[ModelRequest, _OfferedTools, list[ToolResultItem]]:
        """The next model call's request, its offered tools, and the results it adds.

        ``list_sources``: list the tool sources now (else offer their last listing only).
        """
        model_calls = decode_run_state(turn.framework_run_state)
        tools_allowed = model_calls < self.definition.max_model_calls_per_turn
        planning = turn.interaction_mode is InteractionMode.PLANNING
        offered = await self._offered_tools(
            turn, list_sources=list_sources and tools_allowed and not planning, planning=planning
        )
        stored = decode_transcript(turn.messages)
        new_results = self._new_results(stored, turn)
        items: list[TranscriptItem] = [*stored, *new_results]
        if turn.context_summary is not None:
            items.insert(0, summary_note(turn.context_summary))
        request = ModelRequest(
            instructions=await self._instructions(turn),
            items=tuple(pair_tool_calls_with_results(with_plan_note(items, turn))),
            tools=offered.definitions if tools_allowed else (),
            settings=self.definition.model_settings or ModelSettings(),
            tool_choice=self._tool_choice(turn, model_calls),
        )
        return request, offered, new_results

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        model_calls = decode_run_state(turn.framework_run_state)
        limit = self.definition.max_model_calls_per_turn
        tools_allowed = model_calls < limit
        request, offered, new_results = await self._model_request(turn, list_sources=True)
        model = self.model_for(turn.session_settings)
        if request.tool_choice == "required" and self.definition.resolve_model is not None:
            # The definition's own model was checked when it was built.
            check_planning_tool_choice(
                "required",
                model_forced_tool_choice_refusal(model, request.settings),
                where=f"agent {self.definition.name!r}, the model resolve_model chose",
            )
        response = await model.generate(request, _EventSink(turn.events))

        output = response.output
        new_messages = [tool_result_message(result) for result in new_results]
        new_messages.extend(model_output_messages(output))
        if not output.tool_calls:
            return TurnCompleted(
                new_messages=new_messages,
                usage=response.usage,
                model_call_metadata=response.metadata,
            )
        if not tools_allowed:
            # The model had no tools and asked anyway: end the turn, run nothing.
            new_messages.extend(
                tool_result_message(
                    ToolResultItem(call.call_id, call.name, model_call_limit_result(limit))
                )
                for call in output.tool_calls
            )
            return TurnCompleted(
                new_messages=new_messages,
                usage=response.usage,
                model_call_metadata=response.metadata,
            )
        return ToolCallsRequested(
            framework_run_state=encode_run_state(model_calls + 1),
            tool_calls=[self._deferred_call(turn, offered, call) for call in output.tool_calls],
            usage=response.usage,
            new_messages=new_messages,
            model_call_metadata=response.metadata,
        )

    # --- compaction ----------------------------------------------------------------

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The next request's tokens: the model client's ``count_input_tokens`` when it has
        one, else one token per four characters of its JSON. Tool sources count with
        their last listing, without I/O."""
        tools_allowed = decode_run_state(turn.framework_run_state) < (
            self.definition.max_model_calls_per_turn
        )
        planning = turn.interaction_mode is InteractionMode.PLANNING
        request, _, _ = await self._model_request(turn, list_sources=False)
        if tools_allowed and not planning and self._last_listings:
            listed = [tool for tools in self._last_listings.values() for tool in tools]
            request = dataclasses.replace(request, tools=(*request.tools, *listed))
        return await self._count_tokens(self.model_for(turn.session_settings), request)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """The last sequence to summarize: the cut keeping the most messages within the
        budget, between model responses whose tool calls all have stored results."""
        items = decode_transcript(turn.messages)
        point = select_cut(items, retained_token_budget)
        if point is None:
            return None
        return summarized_through(turn.messages, point)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One model call without tools, with ``CONTEXT_SUMMARY_INSTRUCTIONS``, over the
        earlier summary and the messages; the oldest are left out when the request and
        ``max_output_tokens`` would pass ``input_token_budget``."""
        model = self.model_for(request.session_settings)
        settings = self.definition.model_settings or ModelSettings()
        reserved = settings.max_output_tokens or 0
        lead = [summary_note(request.previous_summary)] if request.previous_summary else []

        def build(items: list[TranscriptItem]) -> ModelRequest:
            return ModelRequest(
                instructions=CONTEXT_SUMMARY_INSTRUCTIONS,
                items=tuple(pair_tool_calls_with_results([*lead, *items])),
                settings=settings,
            )

        def fits(items: list[TranscriptItem]) -> bool:
            return estimate_request_tokens(build(items)) + reserved <= request.input_token_budget

        items, omitted = trim_summary_items(decode_transcript(request.messages), fits=fits)
        if omitted:
            logger.warning(
                "%s: left %d messages out of the summary request to fit the context window",
                request.flow_id,
                omitted,
            )
        response = await model.generate(build(items), _EventSink(request.events))
        return ContextSummaryResult(
            summary=response.output.text,
            usage=response.usage,
            model_call_metadata=response.metadata,
        )

    @staticmethod
    async def _count_tokens(model: ModelClient, request: ModelRequest) -> int:
        count = getattr(model, "count_input_tokens", None)
        if callable(count):
            counted = count(request)
            value = await counted if inspect.isawaitable(counted) else counted
            if isinstance(value, int):
                return value
        return estimate_request_tokens(request)

    async def _instructions(self, turn: AgentTurnContext) -> str:
        instructions = self.definition.instructions
        if isinstance(instructions, str):
            return instructions
        context = InstructionContext(
            flow_id=turn.flow_id,
            turn_id=turn.turn_id,
            attempt=turn.attempt,
            interaction_mode=str(getattr(turn, "interaction_mode", "chat")),
            plan=getattr(turn, "plan", None),
            session_settings=turn.session_settings,
        )
        produced = instructions(context)
        text = await produced if inspect.isawaitable(produced) else produced
        if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("an instructions function must return a string")
        return text

    def _new_results(
        self, items: Sequence[TranscriptItem], turn: AgentTurnContext
    ) -> list[ToolResultItem]:
        """Results of the turn's final records whose calls have no stored result yet."""
        results: list[ToolResultItem] = []
        for call_id, name in unanswered_tool_calls(items):
            record = turn.recorded_tool_call(call_id)
            if record is not None and record.is_final:
                results.append(ToolResultItem(call_id, name, describe_tool_call_outcome(record)))
        return results

    def _tool_choice(self, turn: AgentTurnContext, model_calls: int) -> Literal["auto", "required"]:
        """``required`` on a planning turn's first model call while no draft exists."""
        draft = turn.plan is not None and turn.plan.status == "draft"
        if (
            self.definition.planning_tool_choice == "required"
            and turn.interaction_mode is InteractionMode.PLANNING
            and model_calls == 0
            and not draft
        ):
            return "required"
        return "auto"

    async def _offered_tools(
        self, turn: AgentTurnContext, *, list_sources: bool, planning: bool = False
    ) -> _OfferedTools:
        built_ins = tuple(turn.enabled_built_in_tools)
        if planning:
            # A planning turn offers only write_todos.
            definitions = [
                ModelToolDefinition(builtin.name, builtin.description, dict(builtin.parameters))
                for builtin in enabled_builtin_tool_definitions(built_ins)
                if builtin.name == WRITE_TODOS
            ]
            return _OfferedTools({}, tuple(definitions))
        for name in self._tools:
            if name in built_ins:
                raise TypeError(f"tool {name} uses the name of an enabled built-in tool")
        definitions = [
            ModelToolDefinition(tool.name, tool.description, dict(tool.parameters))
            for tool in self._tools.values()
        ]
        source_tools: dict[str, _SourceTool] = {}
        if list_sources:
            for source in self._sources.values():
                for listed in await self._list_source(source):
                    name = listed.name
                    if name in built_ins:
                        raise TypeError(f"tool {name} uses the name of an enabled built-in tool")
                    if name in self._tools:
                        raise TypeError(
                            f"tool {name} of a tool source uses the name of a function tool"
                        )
                    if name in source_tools:
                        raise TypeError(f"two tool sources list a tool named {name}")
                    source_tools[name] = _SourceTool(source, listed)
                    definitions.append(listed)
        definitions.extend(
            ModelToolDefinition(builtin.name, builtin.description, dict(builtin.parameters))
            for builtin in enabled_builtin_tool_definitions(built_ins)
        )
        return _OfferedTools(source_tools=source_tools, definitions=tuple(definitions))

    async def _list_source(self, source: ToolSource) -> Sequence[ModelToolDefinition]:
        # A down source offers nothing in this call; it never fails the turn.
        timeout = self.definition.tool_source_listing_timeout.total_seconds()
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can drop a cancellation
            # of the RunModel attempt that arrives as the listing finishes.
            async with asyncio.timeout(timeout):
                listed = list(await source.list_tools())
            self._last_listings[source.source_name] = tuple(listed)
            return listed
        except Exception as error:
            logger.warning(
                "tool source %r offers no tools in this model call: listing failed (%s)",
                source.source_name,
                str(error) or type(error).__name__,
            )
            return []

    def _deferred_call(
        self, turn: AgentTurnContext, offered: _OfferedTools, call: ModelToolCall
    ) -> DeferredToolCall:
        name = call.name
        listed = offered.source_tools.get(name)
        if listed is not None:
            # A source decides its own calls' policies.
            deferred = listed.source.deferred_tool_call(turn, call, listed.definition)
            return dataclasses.replace(
                deferred,
                tool_source_reference=encode_source_reference(
                    listed.source.source_name, deferred.tool_source_reference
                ),
            )
        # A function tool the call did not offer (a planning turn's) is still this runner's;
        # a name it does not have gets the session default, and its tool Step fails it.
        tool = self._tools.get(name)
        policy = call_policy(
            turn,
            name,
            known=tool is not None,
            declared_effect=tool.effect if tool is not None else None,
            declared_approval=tool.requires_approval if tool is not None else None,
        )
        return DeferredToolCall(call.call_id, name, call.arguments, policy)

    # --- the tool step -------------------------------------------------------------

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        record = call.tool_call
        source_reference = decode_source_reference(record.tool_source_reference)
        if source_reference is not None:
            source = self._sources.get(source_reference.source_name)
            if source is None:
                # Not a ToolExecutionError: the call's effect decides its outcome.
                raise LookupError(
                    f"tool {record.tool_name} came from tool source "
                    f"{source_reference.source_name!r}, which this Worker does not have"
                )
            inner = dataclasses.replace(record, tool_source_reference=source_reference.reference)
            return await source.execute_deferred_tool_call(
                dataclasses.replace(call, tool_call=inner)
            )
        tool = known_tool(self._tools, record.tool_name)
        context = _tool_call_context(call, record, has_poller=tool.tasks is not None)
        return await tool.run(record.arguments, context)

    def _task_poller(self, record: AgentToolCall) -> tuple[SupportsToolTasks, AgentToolCall]:
        """The source or function tool that started the call's task, with the record it
        gets (a source sees its own reference)."""
        source_reference = decode_source_reference(record.tool_source_reference)
        if source_reference is not None:
            source = self._sources.get(source_reference.source_name)
            if not isinstance(source, SupportsToolTasks):
                # Not a ToolExecutionError: the call's effect decides its outcome.
                raise LookupError(
                    f"tool {record.tool_name} started a task, but tool source "
                    f"{source_reference.source_name!r} on this Worker cannot poll tasks"
                )
            return source, dataclasses.replace(
                record, tool_source_reference=source_reference.reference
            )
        tool = self._tools.get(record.tool_name)
        if tool is None or tool.tasks is None:
            raise LookupError(
                f"tool {record.tool_name} started a task, but has no tasks poller on this Worker"
            )
        return tool.tasks, record

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Forward the poll to the tool source or function tool that started the task."""
        poller, record = self._task_poller(poll.tool_call)
        return await poller.poll_tool_task(dataclasses.replace(poll, tool_call=record))

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Forward the cancellation like ``poll_tool_task``."""
        poller, record = self._task_poller(cancellation.tool_call)
        await poller.cancel_tool_task(dataclasses.replace(cancellation, tool_call=record))


def with_plan_note(items: Sequence[TranscriptItem], turn: AgentTurnContext) -> list[TranscriptItem]:
    """``items`` with the plan note as user text before the turn's messages, when there is one."""
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is None:
        return list(items)
    earlier = sum(1 for message in turn.messages if message.turn_id != turn.turn_id)
    return [*items[:earlier], UserTextItem(note), *items[earlier:]]


def _tool_call_context(
    call: DeferredToolExecution, record: AgentToolCall, *, has_poller: bool
) -> ToolCallContext:
    return ToolCallContext(
        flow_id=call.flow_id,
        turn_id=record.turn_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        idempotency_key=call.idempotency_key,
        attempt=call.attempt,
        events=call.events,
        cancellation=call.cancellation,
        deadline=call.deadline,
        heartbeat=call.heartbeat,
        heartbeat_checkpoint=call.heartbeat_checkpoint,
        save_heartbeat_checkpoint=call.save_heartbeat_checkpoint,
        input_answers=tuple(call.input_answers),
        input_continuation=record.input_continuation,
        supports_tool_tasks=call.supports_tool_tasks and has_poller,
    )
