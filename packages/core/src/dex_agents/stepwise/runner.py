"""``StepwiseRunner``: the built-in agent loop as an ``AgentFrameworkRunner``.

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
from collections.abc import Sequence
from dataclasses import dataclass

from dex_agents.adapter_support import (
    UNKNOWN_TOOL_POLICY,
    deprecated_aliases,
    known_tool,
    resolve_declared_tool_policy,
)
from dex_agents.builtin_tools import BUILT_IN_TOOL_POLICY, enabled_builtin_tool_definitions
from dex_agents.models.types import (
    ModelRequest,
    ModelSettings,
    ModelToolCall,
    ModelToolDefinition,
    ToolResultItem,
    TranscriptItem,
)
from dex_agents.runner import (
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.stepwise.definition import AgentDefinition, InstructionContext
from dex_agents.stepwise.function_tool import FunctionTool, ToolCallContext
from dex_agents.stepwise.tool_source import (
    ToolSource,
    decode_source_reference,
    encode_source_reference,
)
from dex_agents.stepwise.transcript import (
    decode_run_state,
    decode_transcript,
    encode_run_state,
    model_output_messages,
    pair_tool_calls_with_results,
    tool_result_message,
    unanswered_tool_calls,
    user_text_message,
)
from dex_agents.texts import describe_tool_call_outcome, model_call_limit_result
from dex_agents.values import AgentToolCall, FrameworkMessage

__all__ = ["StepwiseRunner"]

logger = logging.getLogger(__name__)


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
    """What one model call offers, by name, in offer order."""

    function_tools: dict[str, FunctionTool]
    source_tools: dict[str, _SourceTool]
    built_ins: tuple[str, ...]
    definitions: tuple[ModelToolDefinition, ...]


class StepwiseRunner:
    """Runs an ``AgentDefinition`` under the session Flow; keeps no state between calls."""

    def __init__(self, definition: AgentDefinition) -> None:
        self.definition = definition
        self._tools: dict[str, FunctionTool] = {tool.name: tool for tool in definition.tools}
        self._sources: dict[str, ToolSource] = {
            source.source_name: source for source in definition.tool_sources
        }

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_text_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's final records that are not stored yet."""
        items = decode_transcript(turn.messages)
        return [tool_result_message(result) for result in self._new_results(items, turn)]

    # --- the model step ------------------------------------------------------------

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        model_calls = decode_run_state(turn.framework_run_state)
        limit = self.definition.max_model_calls_per_turn
        tools_allowed = model_calls < limit
        offered = await self._offered_tools(turn, list_sources=tools_allowed)

        stored = decode_transcript(turn.messages)
        new_results = self._new_results(stored, turn)
        items: list[TranscriptItem] = [*stored, *new_results]
        request = ModelRequest(
            instructions=await self._instructions(turn),
            items=tuple(pair_tool_calls_with_results(items)),
            tools=offered.definitions if tools_allowed else (),
            settings=self.definition.model_settings or ModelSettings(),
        )
        response = await self.definition.model.generate(request, _EventSink(turn.events))

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

    async def _offered_tools(self, turn: AgentTurnContext, *, list_sources: bool) -> _OfferedTools:
        built_ins = tuple(turn.enabled_built_in_tools)
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
        return _OfferedTools(
            function_tools=self._tools,
            source_tools=source_tools,
            built_ins=built_ins,
            definitions=tuple(definitions),
        )

    async def _list_source(self, source: ToolSource) -> Sequence[ModelToolDefinition]:
        # A down source offers nothing in this call; it never fails the turn.
        timeout = self.definition.tool_source_listing_timeout.total_seconds()
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can drop a cancellation
            # of the RunModel attempt that arrives as the listing finishes.
            async with asyncio.timeout(timeout):
                return list(await source.list_tools())
        except Exception as error:
            logger.warning(
                "tool source %r offers no tools in this model call: listing failed (%s)",
                source.source_name,
                error or type(error).__name__,
            )
            return []

    def _deferred_call(
        self, turn: AgentTurnContext, offered: _OfferedTools, call: ModelToolCall
    ) -> DeferredToolCall:
        name = call.name
        if name in offered.built_ins:
            return DeferredToolCall(call.call_id, name, call.arguments, BUILT_IN_TOOL_POLICY)
        tool = offered.function_tools.get(name)
        if tool is not None:
            # The session's policy wins over the tool's own effect and approval.
            policy = resolve_declared_tool_policy(turn, name, tool.effect, tool.requires_approval)
            return DeferredToolCall(call.call_id, name, call.arguments, policy)
        listed = offered.source_tools.get(name)
        if listed is not None:
            deferred = listed.source.deferred_tool_call(turn, call, listed.definition)
            return dataclasses.replace(
                deferred,
                tool_source_reference=encode_source_reference(
                    listed.source.source_name, deferred.tool_source_reference
                ),
            )
        return DeferredToolCall(call.call_id, name, call.arguments, UNKNOWN_TOOL_POLICY)

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
        return await tool.run(record.arguments, _tool_call_context(call, record))


def _tool_call_context(call: DeferredToolExecution, record: AgentToolCall) -> ToolCallContext:
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
    )


__getattr__ = deprecated_aliases(
    __name__, {"StepwiseAgentRunner": ("dex_agents.stepwise.StepwiseRunner", StepwiseRunner)}
)
