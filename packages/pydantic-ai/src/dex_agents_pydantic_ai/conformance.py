"""The conformance suite's scenario factory for the Pydantic AI runner.

``build_conformance_flow(script, tools, state_directory, session)`` turns a neutral
``ModelScript`` into a Pydantic AI ``FunctionModel`` and the scenario's tools
into Pydantic AI tools that declare their effect and approval in their own
metadata (``dex_tool_metadata``), so the suite also checks how the runner reads
a tool's declaration. The agent then runs under the real ``PydanticAIRunner``.

The scripted model takes the turn and the position in it from the model step's
turn context (``get_model_step_context()``; the position is the number of model
responses the turn has stored), never from process memory,
so a model call that reruns after a crash gives the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from dex_agents import AgentSessionFlow
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    get_deferred_tool_execution,
    get_model_step_context,
)
from dex_agents.testing import (
    DEFAULT_SCENARIO_MODEL,
    ModelScript,
    ScenarioSession,
    ScenarioTool,
    ToolChoice,
    play_scripted_model_call,
    play_scripted_summary,
    run_scenario_tool,
    scenario_model_name,
    scenario_tool_outcome,
    scripted_answer_text,
    scripted_tool_call_id,
    with_scenario_mcp_tools,
)
from dex_agents_pydantic_ai import (
    ask_user,
    create_pydantic_ai_session_flow,
    dex_tool_metadata,
    mcp_source_tools,
)

__all__ = ["CONFORMANCE_FACTORY", "build_conformance_flow"]

CONFORMANCE_FACTORY = "dex_agents_pydantic_ai.conformance:build_conformance_flow"
"""Import path of the factory, for ``ConformanceAdapter(factory=...)``."""

_SCRIPTED_USAGE = RequestUsage(input_tokens=10, output_tokens=5)


class _ScriptedModel:
    """Plays the script's response for the current turn and position; records ``name``."""

    def __init__(
        self,
        script: ModelScript,
        state_directory: Path,
        summary_gate: str | None = None,
        name: str = DEFAULT_SCENARIO_MODEL,
    ) -> None:
        self.script = script
        self.state_directory = state_directory
        self.summary_gate = summary_gate
        self.name = name

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            # The summarizer agent of summarize_context, which runs outside a model step.
            lines = [line.removeprefix("user: ") for line in _readable_history(messages)]
            text = await play_scripted_summary(
                self.state_directory, self.summary_gate, lines, model=self.name
            )
            return ModelResponse(
                parts=[TextPart(text)], usage=_SCRIPTED_USAGE, model_name="conformance-script"
            )
        turn = get_model_step_context()
        position = _position_in_turn(turn)
        received = _received_tool_results(messages)
        response = await play_scripted_model_call(
            self.script,
            self.state_directory,
            turn_id=turn.turn_id,
            position=position,
            attempt=turn.attempt,
            history=_readable_history(messages),
            tool_results={part.tool_call_id: _text(part) for part in received},
            write_text=turn.events.write_text_delta,
            model=self.name,
            offered_tools=[tool.name for tool in info.function_tools],
            tool_choice=_tool_choice(info.model_settings),
        )
        if response.tool_calls:
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        tool_name=spec.tool_name,
                        args=json.dumps(dict(spec.arguments), sort_keys=True),
                        tool_call_id=scripted_tool_call_id(spec, position, index),
                    )
                    for index, spec in enumerate(response.tool_calls)
                ],
                usage=_SCRIPTED_USAGE,
                model_name="conformance-script",
            )
        text = scripted_answer_text(
            response,
            lambda: [(part.tool_name, _text(part)) for part in _turn_tool_results(messages)],
        )
        return ModelResponse(
            parts=[TextPart(text)], usage=_SCRIPTED_USAGE, model_name="conformance-script"
        )


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The suite's scenario factory over ``PydanticAIRunner``; see the module docstring."""
    state_directory = Path(state_directory)
    models = {
        name: FunctionModel(
            _ScriptedModel(script, state_directory, session.summary_gate, name), model_name=name
        )
        for name in (DEFAULT_SCENARIO_MODEL, *session.session_models)
    }
    scenario_tools = [_pydantic_ai_tool(tool, state_directory) for tool in tools]
    pydantic_tools, tool_tasks = with_scenario_mcp_tools(
        session, tools, state_directory, scenario_tools, mcp_source_tools
    )
    agent = Agent(models[DEFAULT_SCENARIO_MODEL], tools=pydantic_tools, name="conformance")
    return create_pydantic_ai_session_flow(
        agent,
        session.flow_type,
        tool_tasks=tool_tasks,
        # The application's way to choose the model per session, here by name.
        resolve_model=lambda settings: models[
            scenario_model_name(settings, session.session_models)
        ],
        planning_tool_choice=session.planning_tool_choice,
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        **session.storage_options(),
    )


def _tool_choice(settings: Mapping[str, Any] | None) -> ToolChoice:
    """Pydantic AI's ``tool_choice`` setting in the suite's terms: ``required`` or a list of
    tool names make a tool call required."""
    choice = (settings or {}).get("tool_choice")
    if choice is None or choice == "auto":
        return "auto"
    if choice == "none":
        return "none"
    return "required"


def _pydantic_ai_tool(tool: ScenarioTool, state_directory: Path) -> Tool[Any]:
    async def run(**arguments: Any) -> str:
        call = get_deferred_tool_execution()
        if tool.question is None:
            return await run_scenario_tool(
                tool,
                json.dumps(arguments),
                state_directory=state_directory,
                idempotency_key=call.idempotency_key,
                attempt=call.attempt,
            )
        # This package's way to ask: the session asks the user, and the rerun returns
        # the answer from ask_user.
        answer = ask_user(tool.question, choices=tool.choices, continuation=tool.continuation)
        outcome = await scenario_tool_outcome(
            tool,
            json.dumps(arguments),
            state_directory=state_directory,
            idempotency_key=call.idempotency_key,
            attempt=call.attempt,
            input_answers=(answer,),
            input_continuation=call.tool_call.input_continuation,
        )
        assert isinstance(outcome, str)
        return outcome

    pydantic_tool = Tool[Any].from_schema(
        run,
        name=tool.name,
        description=tool.description,
        json_schema={"type": "object", "additionalProperties": True, "properties": {}},
    )
    pydantic_tool.metadata = dex_tool_metadata(
        tool.effect, requires_approval=tool.requires_approval
    )
    return pydantic_tool


def _position_in_turn(turn: AgentTurnContext) -> int:
    """How many model responses the turn has stored: its stored messages are incremental."""
    return sum(
        1
        for message in turn.messages
        if message.turn_id == turn.turn_id
        and any(
            isinstance(stored, ModelResponse)
            for stored in ModelMessagesTypeAdapter.validate_json(message.framework_item)
        )
    )


def _text(part: ToolReturnPart) -> str:
    return part.model_response_str(wrap_if_error=False)


def _received_tool_results(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results of the request this model call answers."""
    if not messages or not isinstance(messages[-1], ModelRequest):
        return []
    return [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]


def _turn_tool_results(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """Every tool result since the turn's user prompt, in order."""
    results: list[ToolReturnPart] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        if any(isinstance(part, UserPromptPart) for part in message.parts):
            results = []
        results.extend(part for part in message.parts if isinstance(part, ToolReturnPart))
    return results


def _readable_history(messages: Sequence[ModelMessage]) -> list[str]:
    """One readable line per part the model call was given."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                lines.append(f"user: {part.content}")
            elif isinstance(part, SystemPromptPart):
                lines.append(f"system: {part.content}")
            elif isinstance(part, ToolReturnPart):
                lines.append(f"tool {part.tool_name}: {_text(part)}")
            elif isinstance(part, TextPart):
                lines.append(f"assistant: {part.content}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"assistant -> {part.tool_name} {part.args_as_json_str()}")
            elif isinstance(part, ThinkingPart):
                lines.append(f"thinking: {part.content}")
    return lines
