"""The Stepwise conformance factory: neutral scenarios as a Stepwise agent.

``build_stepwise_flow`` (import path ``STEPWISE_FLOW_FACTORY``) turns the
suite's ``ModelScript`` into ``ScriptedModelClient`` models, one per name of
``ScenarioSession.session_models`` plus the default, which the definition's
``resolve_model`` chooses from the session settings, and its scenario tools
into function tools with the effects they name, so the shared conformance suite
proves the Stepwise loop on a real engine, Worker children included. Only the
test hooks (recording each model call, gates, failing attempts) live here; the
turn itself runs through the ordinary ``StepwiseRunner``.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dex_agents._compaction import CompactionPolicy
from dex_agents.models import (
    ModelOutputItem,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
)
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    ToolInputRequested,
)
from dex_agents.session._flow import AgentSessionFlow, create_agent_session_flow
from dex_agents.stepwise._flow import session_options_of
from dex_agents.stepwise._mcp import ToolSource
from dex_agents.stepwise._messages import decode_transcript
from dex_agents.stepwise._runner import AgentDefinition, StepwiseRunner
from dex_agents.stepwise._tools import FunctionTool, ToolCallContext, function_tool
from dex_agents.testing import (
    DEFAULT_SCENARIO_MODEL,
    FileGate,
    ModelScript,
    ScenarioSession,
    ScenarioTaskPoller,
    ScenarioTool,
    ToolBehaviour,
    play_scripted_model_call,
    record_summary_call,
    scenario_model_name,
    scenario_tool_outcome,
    scripted_answer_text,
    scripted_tool_call_id,
)

__all__ = ["STEPWISE_FLOW_FACTORY", "build_stepwise_flow"]

STEPWISE_FLOW_FACTORY = "dex_agents.stepwise.conformance:build_stepwise_flow"

# Any arguments object: the scenario tool itself decides what its arguments mean.
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class _PendingCall:
    """The running model step's scripted call: the turn, its position and what it read.

    ``run_model_step`` sets it; the scripted model client of the session's model plays
    the call inside ``generate``, where the request shows what the call offered."""

    turn: AgentTurnContext
    position: int
    history: list[str]
    tool_results: dict[str, str]


_current: contextvars.ContextVar[_PendingCall] = contextvars.ContextVar("stepwise_scenario_call")


def _this_turn(items: Sequence[TranscriptItem]) -> list[TranscriptItem]:
    start = 0
    for index, item in enumerate(items):
        if isinstance(item, UserTextItem):
            start = index
    return list(items[start:])


def _history_line(item: TranscriptItem) -> str:
    if isinstance(item, UserTextItem):
        return f"user: {item.text}"
    if isinstance(item, ToolResultItem):
        return f"tool {item.tool_name}: {item.output}"
    calls = ", ".join(call.name for call in item.tool_calls)
    return f"assistant: {item.text}{' -> ' + calls if calls else ''}"


def _scripted_model(script: ModelScript, state_directory: Path, name: str) -> ScriptedModelClient:
    """The scripted model ``name``: it plays the running call and records its own name."""

    async def reply(request: ModelRequest) -> ScriptedModelReply:
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            # A summary call: name what it summarized, so a scenario can check it.
            record_summary_call(state_directory, model=name)
            return ScriptedModelReply(
                text="summary of " + " | ".join(_history_line(item) for item in request.items)
            )
        pending = _current.get()
        response = await play_scripted_model_call(
            script,
            state_directory,
            turn_id=pending.turn.turn_id,
            position=pending.position,
            attempt=pending.turn.attempt,
            history=pending.history,
            tool_results=pending.tool_results,
            write_text=pending.turn.events.write_text_delta,
            model=name,
            offered_tools=[tool.name for tool in request.tools],
            tool_choice=request.tool_choice,
        )
        if response.tool_calls:
            return ScriptedModelReply(
                tool_calls=[
                    ScriptedToolCall(
                        spec.tool_name,
                        dict(spec.arguments),
                        call_id=scripted_tool_call_id(spec, pending.position, index),
                    )
                    for index, spec in enumerate(response.tool_calls)
                ]
            )
        return ScriptedModelReply(
            text=scripted_answer_text(
                response,
                lambda: [
                    (item.tool_name, item.output)
                    for item in _this_turn(request.items)
                    if isinstance(item, ToolResultItem)
                ],
            )
        )

    return ScriptedModelClient(reply)


class _ScenarioStepwiseRunner(StepwiseRunner):
    """A ``StepwiseRunner`` with the suite's hooks around each model step."""

    def __init__(
        self,
        definition: AgentDefinition,
        state_directory: Path,
        summary_gate: str | None = None,
    ) -> None:
        super().__init__(definition)
        self._state_directory = state_directory
        self._summary_gate = summary_gate

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        if self._summary_gate is not None:
            await FileGate(self._state_directory, self._summary_gate).pass_through_async()
        return await super().summarize_context(request)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        stored = decode_transcript(turn.messages)
        position = sum(1 for item in _this_turn(stored) if isinstance(item, ModelOutputItem))
        new_results = self._new_results(stored, turn)
        token = _current.set(
            _PendingCall(
                turn=turn,
                position=position,
                history=[_history_line(item) for item in [*stored, *new_results]],
                tool_results={result.tool_call_id: result.output for result in new_results},
            )
        )
        try:
            return await super().run_model_step(turn)
        finally:
            _current.reset(token)


def _scenario_function_tool(tool: ScenarioTool, state_directory: Path) -> FunctionTool:
    async def execute(
        arguments: dict[str, Any], context: ToolCallContext
    ) -> str | ToolInputRequested:
        return await scenario_tool_outcome(
            tool,
            json.dumps(arguments),
            state_directory=state_directory,
            idempotency_key=context.idempotency_key,
            attempt=context.attempt,
            input_answers=context.input_answers,
            input_continuation=context.input_continuation,
        )

    return function_tool(
        name=tool.name,
        description=tool.description,
        parameters=_ANY_OBJECT,
        execute=execute,
        effect=tool.effect,
        requires_approval=tool.requires_approval,
        tasks=(
            ScenarioTaskPoller([tool], state_directory)
            if tool.behaviour is ToolBehaviour.STARTS_TASK
            else None
        ),
    )


def _mcp_sources(session: ScenarioSession) -> list[ToolSource]:
    """The scenario's MCP source, when it asks for one: Stepwise lists it itself."""
    if session.mcp_server_url is None:
        return []
    from dex_agents.testing import scenario_mcp_tools

    mcp = scenario_mcp_tools(session)
    return [mcp.source] if mcp is not None else []


def build_stepwise_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The Stepwise scenario factory ``(script, tools, state_directory, session) -> Flow``."""
    state = Path(state_directory)
    models = {
        name: _scripted_model(script, state, name)
        for name in (DEFAULT_SCENARIO_MODEL, *session.session_models)
    }
    definition = AgentDefinition(
        name="conformance",
        instructions="You are the conformance suite's scripted agent.",
        model=models[DEFAULT_SCENARIO_MODEL],
        # The application's way to choose the model per session, here by name.
        resolve_model=lambda settings: models[
            scenario_model_name(settings, session.session_models)
        ],
        tools=[_scenario_function_tool(tool, state) for tool in tools],
        tool_sources=_mcp_sources(session),
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        planning_tool_choice=session.planning_tool_choice,
        compaction=(
            CompactionPolicy(context_window_tokens=session.compaction_context_window_tokens)
            if session.compaction_context_window_tokens is not None
            else None
        ),
    )
    runner = _ScenarioStepwiseRunner(definition, state, session.summary_gate)
    options = replace(
        session_options_of(definition),
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        retained_message_limit=session.retained_message_limit,
        message_window_size=session.message_window_size,
        message_chunk_size=session.message_chunk_size,
    )
    return create_agent_session_flow(runner, session.flow_type, options)
