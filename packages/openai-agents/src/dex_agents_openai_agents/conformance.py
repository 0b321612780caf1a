"""The adapter's conformance factory: the suite's neutral scenarios as an SDK agent.

``build_conformance_flow`` (``CONFORMANCE_FACTORY``, its import path)
turns a ``ModelScript`` into ``ScenarioModel``, a ``Model`` that answers each
call with a one-step ``agents.testing.ScriptedModel`` (the SDK's own test model),
and each ``ScenarioTool`` into a ``FunctionTool`` that declares its effect. The
model keeps no state: the user turn comes from the turn ID and the position in
the turn from the input items, so a rerun after a crash gives the same answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agents import Agent, AgentOutputSchemaBase, FunctionTool, Handoff, Model, ModelSettings, Tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import ModelTracing
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses.response_prompt_param import ResponsePromptParam

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    ToolInputRequested,
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
    scenario_model_name,
    scenario_tool_outcome,
    scripted_answer_text,
    scripted_tool_call_id,
    with_scenario_mcp_tools,
)
from dex_agents_openai_agents import (
    create_openai_agents_session_flow,
    declare_tool_effect,
    mcp_source_tools,
)
from dex_agents_openai_agents._messages import message_text

__all__ = [
    "CONFORMANCE_FACTORY",
    "SCENARIO_USAGE",
    "ScenarioModel",
    "build_conformance_flow",
    "scenario_function_tool",
]

CONFORMANCE_FACTORY = "dex_agents_openai_agents.conformance:build_conformance_flow"
"""Import path of the factory, for ``ConformanceAdapter(factory=...)``."""

SCENARIO_USAGE = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The conformance suite's scenario factory for this adapter.

    The agent's model is the default scripted model; ``resolve_model`` chooses one of the
    session's scripted models (``ScenarioSession.session_models``) from the turn's session
    settings, as an application chooses among the models its Workers built.
    """
    directory = Path(state_directory)
    models = {
        name: ScenarioModel(script, directory, session.summary_gate, name=name)
        for name in (DEFAULT_SCENARIO_MODEL, *session.session_models)
    }

    def resolve_model(settings: Mapping[str, Any]) -> ScenarioModel:
        return models[scenario_model_name(settings, session.session_models)]

    scenario_tools = [scenario_function_tool(tool, directory) for tool in tools]
    function_tools, tool_tasks = with_scenario_mcp_tools(
        session, tools, directory, scenario_tools, mcp_source_tools
    )
    agent = Agent[Any](
        name="conformance_agent",
        instructions="Answer the user; use the tools when they help.",
        model=models[DEFAULT_SCENARIO_MODEL],
        tools=list(function_tools),
    )
    return create_openai_agents_session_flow(
        agent,
        session.flow_type,
        AgentSessionOptions(
            interrupt_deadline=session.interrupt_deadline,
            built_in_tools=session.built_in_tools,
            plan_mode_enabled=session.plan_mode_enabled,
            question_supersedes_later_calls=session.question_supersedes_later_calls,
            **session.storage_options(),
        ),
        tool_tasks=tool_tasks,
        planning_tool_choice=session.planning_tool_choice,
        resolve_model=resolve_model if session.session_models else None,
    )


def scenario_function_tool(tool: ScenarioTool, state_directory: Path) -> FunctionTool:
    """A ``FunctionTool`` that runs ``tool`` as the scenario says and declares its effect."""

    async def invoke(context: ToolContext[Any], arguments: str) -> str | ToolInputRequested:
        del context
        execution = get_deferred_tool_execution()
        # A tool with a question returns ToolInputRequested until the rerun has its answer.
        return await scenario_tool_outcome(
            tool,
            arguments,
            state_directory=state_directory,
            idempotency_key=execution.idempotency_key,
            attempt=execution.attempt,
            input_answers=execution.input_answers,
            input_continuation=execution.tool_call.input_continuation,
        )

    function_tool = FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema={"type": "object", "properties": {}, "additionalProperties": True},
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
    return declare_tool_effect(function_tool, tool.effect, requires_approval=tool.requires_approval)


def _tool_choice(settings: ModelSettings) -> ToolChoice:
    """The call's tool choice as the suite records it: a named tool or ``required`` must
    call a tool."""
    choice = settings.tool_choice
    if choice is None or choice == "auto":
        return "auto"
    if choice == "none":
        return "none"
    return "required"


def _is_user_message(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type") in (None, "message")


def _readable(item: Mapping[str, Any], names: Mapping[str, str]) -> str:
    kind = item.get("type")
    if kind == "function_call":
        return f"assistant: -> {item.get('name')} {item.get('arguments')}"
    if kind == "function_call_output":
        return f"tool {names.get(str(item.get('call_id')), '?')}: {item.get('output')}"
    return f"{item.get('role', kind)}: {message_text(item) or ''}"


class ScenarioModel(Model):
    """Plays a ``ModelScript``; see the module docstring."""

    def __init__(
        self,
        script: ModelScript,
        state_directory: Path,
        summary_gate: str | None = None,
        *,
        name: str = DEFAULT_SCENARIO_MODEL,
    ) -> None:
        self.script = script
        self.state_directory = state_directory
        self.summary_gate = summary_gate
        self.name = name

    async def _step(
        self,
        system_instructions: str | None,
        model_input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: Sequence[Tool],
    ) -> ModelStep:
        items: list[dict[str, Any]] = (
            [{"role": "user", "content": model_input}]
            if isinstance(model_input, str)
            else [cast(dict[str, Any], item) for item in model_input]
        )
        if system_instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            # The summarizer agent of summarize_context, which runs outside a model step.
            lines = [message_text(item) or "" for item in items]
            text = await play_scripted_summary(
                self.state_directory, self.summary_gate, lines, model=self.name
            )
            return ModelStep(output=[assistant_message(text)], usage=SCENARIO_USAGE)
        turn = get_model_step_context()
        names = {
            str(item.get("call_id")): str(item.get("name"))
            for item in items
            if item.get("type") == "function_call"
        }
        outputs = {
            str(item.get("call_id")): str(item.get("output"))
            for item in items
            if item.get("type") == "function_call_output"
        }
        last_user = max((i for i, item in enumerate(items) if _is_user_message(item)), default=-1)
        turn_items = items[last_user + 1 :]
        groups: list[list[str]] = []
        previous_was_call = False
        for item in turn_items:
            is_call = item.get("type") == "function_call"
            if is_call and not previous_was_call:
                groups.append([])
            if is_call:
                groups[-1].append(str(item.get("call_id")))
            previous_was_call = is_call
        position = len(groups)
        seen = {cid: outputs[cid] for cid in (groups[-1] if groups else []) if cid in outputs}
        response = await play_scripted_model_call(
            self.script,
            self.state_directory,
            turn_id=turn.turn_id,
            position=position,
            attempt=turn.attempt,
            history=[_readable(item, names) for item in items],
            tool_results=seen,
            write_text=turn.events.write_text_delta,
            model=self.name,
            offered_tools=[str(getattr(tool, "name", "")) for tool in tools],
            tool_choice=_tool_choice(model_settings),
        )
        if response.tool_calls:
            output = [
                function_call(
                    spec.tool_name,
                    json.dumps(dict(spec.arguments), separators=(",", ":"), sort_keys=True),
                    call_id=scripted_tool_call_id(spec, position, index),
                )
                for index, spec in enumerate(response.tool_calls)
            ]
            return ModelStep(output=output, usage=SCENARIO_USAGE)
        text = scripted_answer_text(
            response,
            lambda: [
                (names[cid], outputs[cid]) for group in groups for cid in group if cid in outputs
            ],
        )
        message = assistant_message(text, item_id=f"msg-{turn.turn_id}-{position}")
        return ModelStep(output=[message], usage=SCENARIO_USAGE)

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
        step = await self._step(system_instructions, input, model_settings, tools)
        return await ScriptedModel([step]).get_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )

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
        step = await self._step(system_instructions, input, model_settings, tools)
        async for event in ScriptedModel([step]).stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        ):
            yield event
