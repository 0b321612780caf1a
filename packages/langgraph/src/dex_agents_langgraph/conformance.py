"""The conformance suite's hook for the LangGraph adapter: the scenario factories and
the scripted chat model that plays the suite's neutral scripts.

``build_conformance_flow`` turns a neutral ``ModelScript`` into a
``ScriptedChatModel`` and the scenario's tools into LangChain tools that declare
their effects (``scenario_tool``), and builds the session Flow with the runner's
one-node graph; ``build_prebuilt_conformance_flow`` runs the same through
``create_react_agent``. Worker child processes import them by path
(``CONFORMANCE_FACTORY``, ``PREBUILT_CONFORMANCE_FACTORY``).

``ScriptedChatModel`` is a real ``BaseChatModel`` with ``bind_tools``: each call
answers with the scripted response for the turn and model call it is in (read
from the run metadata the runner passes), records what it saw with
``record_model_call``, streams ``text_before_gate`` before it waits on a gate,
and fails on the scripted attempts.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.pregel import Pregel
from langgraph.types import interrupt
from pydantic import ConfigDict

from dex_agents import AgentSessionFlow
from dex_agents.runner import CONTEXT_SUMMARY_INSTRUCTIONS, ToolTasksOption
from dex_agents.testing import (
    DEFAULT_SCENARIO_MODEL,
    ModelScript,
    ModelTurn,
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
from dex_agents_langgraph import (
    create_langgraph_session_flow,
    declare_tool_effect,
    idempotency_key_of,
    mcp_source_tools,
    tool_execution_of,
)

__all__ = [
    "CONFORMANCE_FACTORY",
    "PREBUILT_CONFORMANCE_FACTORY",
    "SCRIPTED_USAGE_METADATA",
    "ScriptedChatModel",
    "build_conformance_flow",
    "build_prebuilt_conformance_flow",
    "scenario_tool",
]

CONFORMANCE_FACTORY = "dex_agents_langgraph.conformance:build_conformance_flow"
PREBUILT_CONFORMANCE_FACTORY = "dex_agents_langgraph.conformance:build_prebuilt_conformance_flow"


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """A session Flow over a scripted LangChain chat model and the scenario's tools."""
    directory = Path(state_directory)
    session = _scaled_to_text_tokens(session)
    models = {
        name: ScriptedChatModel(
            script=script,
            state_directory=directory,
            summary_gate=session.summary_gate,
            scenario_model=name,
        )
        for name in (DEFAULT_SCENARIO_MODEL, *session.session_models)
    }
    langchain_tools, tool_tasks = _tools_and_pollers(tools, directory, session)
    return create_langgraph_session_flow(
        models[DEFAULT_SCENARIO_MODEL],
        session.flow_type,
        tools=langchain_tools,
        # The application's way to choose the model per session, here by name.
        resolve_model=lambda settings: models[
            scenario_model_name(settings, session.session_models)
        ],
        planning_tool_choice=session.planning_tool_choice,
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        tool_tasks=tool_tasks,
        **session.storage_options(),
    )


def _tools_and_pollers(
    tools: Sequence[ScenarioTool], directory: Path, session: ScenarioSession
) -> tuple[list[BaseTool], ToolTasksOption]:
    """The scenario's tools as LangChain tools, the MCP ones included, and their pollers."""
    langchain_tools: list[BaseTool] = [scenario_tool(tool, directory) for tool in tools]
    return with_scenario_mcp_tools(session, tools, directory, langchain_tools, mcp_source_tools)


TEXT_TO_JSON_TOKENS = 3
"""About how many times more tokens the stored JSON of a short scripted message counts
(the estimate of Stepwise, which sizes the scenarios' context windows) than LangChain's
``count_tokens_approximately`` of its text does."""


def _scaled_to_text_tokens(session: ScenarioSession) -> ScenarioSession:
    """The scenario's context window in the tokens LangChain counts, so the same few short
    turns fill it."""
    window = session.compaction_context_window_tokens
    if window is None:
        return session
    return replace(session, compaction_context_window_tokens=max(1, window // TEXT_TO_JSON_TOKENS))


def build_prebuilt_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The same scenario through LangGraph's prebuilt ReAct agent, stopped before its tools."""
    directory = Path(state_directory)
    session = _scaled_to_text_tokens(session)
    langchain_tools, tool_tasks = _tools_and_pollers(tools, directory, session)
    models = {
        name: ScriptedChatModel(
            script=script,
            state_directory=directory,
            summary_gate=session.summary_gate,
            scenario_model=name,
        )
        for name in (DEFAULT_SCENARIO_MODEL, *session.session_models)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's
        from langgraph.prebuilt import create_react_agent  # pyright: ignore[reportDeprecated, reportUnknownVariableType]

        # One agent graph per model; the session settings choose one per turn.
        graphs: dict[str, Pregel[Any, Any, Any, Any]] = {
            name: create_react_agent(  # pyright: ignore[reportDeprecated, reportUnknownMemberType]
                model,
                langchain_tools,
                # An agent without tools has no tools node to stop before.
                interrupt_before=["tools"] if langchain_tools else None,
            )
            for name, model in models.items()
        }
    return create_langgraph_session_flow(
        graphs[DEFAULT_SCENARIO_MODEL],
        session.flow_type,
        resolve_graph=lambda settings: graphs[
            scenario_model_name(settings, session.session_models)
        ],
        # A graph's summary calls go to the chat model of the same name.
        resolve_model=lambda settings: models[
            scenario_model_name(settings, session.session_models)
        ],
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        tool_tasks=tool_tasks,
        **session.storage_options(),
    )


# --- the scripted chat model and the scenario tools ------------------------------------

SCRIPTED_USAGE_METADATA = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
SCRIPTED_MODEL_NAME = "dex-scripted"


class ScriptedChatModel(BaseChatModel):
    """Plays ``script`` as a LangChain chat model; see the module docstring.

    It reads ``dex_turn_id``, ``dex_attempt`` and ``dex_model_call_index`` from the
    run metadata, which ``LangGraphRunner`` sets on every model step.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: ModelScript
    state_directory: Path
    summary_gate: str | None = None
    """The ``FileGate`` a summary call (``summarize_context``) waits at first."""
    scenario_model: str = DEFAULT_SCENARIO_MODEL
    """The name this model records with each call (``ScenarioSession.session_models``)."""

    @property
    def _llm_type(self) -> str:
        return SCRIPTED_MODEL_NAME

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(
            tools=[convert_to_openai_tool(tool) for tool in tools],
            tool_choice=tool_choice,
            **kwargs,
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("ScriptedChatModel is async only; call ainvoke")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if messages and _content_text(messages[0]) == CONTEXT_SUMMARY_INSTRUCTIONS:
            # The summary call of summarize_context, which runs outside a model step.
            lines = [_content_text(m) for m in messages[1:]]
            text = await play_scripted_summary(
                self.state_directory, self.summary_gate, lines, model=self.scenario_model
            )
            summary = AIMessage(content=text, usage_metadata=cast(Any, SCRIPTED_USAGE_METADATA))
            return ChatResult(generations=[ChatGeneration(message=summary)])
        metadata: Mapping[str, Any] = run_manager.metadata if run_manager is not None else {}
        try:
            turn_id = str(metadata["dex_turn_id"])
            attempt = int(metadata["dex_attempt"])
            position = int(metadata["dex_model_call_index"])
        except KeyError as error:
            raise ValueError(
                f"ScriptedChatModel needs the run metadata {error} that LangGraphRunner sets"
            ) from None
        given = [m for m in messages if not isinstance(m, SystemMessage)]

        async def stream_text(text: str) -> None:
            if run_manager is not None:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                await run_manager.on_llm_new_token(text, chunk=chunk)

        response = await play_scripted_model_call(
            self.script,
            self.state_directory,
            turn_id=turn_id,
            position=position,
            attempt=attempt,
            history=[_history_line(m) for m in given],
            tool_results={m.tool_call_id: _content_text(m) for m in _trailing_results(given)},
            write_text=stream_text,
            model=self.scenario_model,
            offered_tools=[tool["function"]["name"] for tool in kwargs.get("tools") or ()],
            tool_choice=_tool_choice(kwargs.get("tool_choice")),
        )
        message = _response_message(response, position, given)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _tool_choice(value: object) -> ToolChoice:
    """LangChain's ``bind_tools(tool_choice=)`` in the suite's terms: a tool's name, ``any``,
    ``required`` or ``True`` make a call required."""
    if value is None or value is False or value == "auto":
        return "auto"
    if value == "none":
        return "none"
    return "required"


def _content_text(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return str(message.text) or json.dumps(message.content)


def _history_line(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return f"user: {_content_text(message)}"
    if isinstance(message, AIMessage):
        names = ", ".join(call["name"] for call in message.tool_calls)
        return f"assistant: {message.text}{' -> ' + names if names else ''}"
    if isinstance(message, ToolMessage):
        return f"tool {message.name}: {_content_text(message)}"
    return f"{message.type}: {_content_text(message)}"


def _trailing_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The results after the last AI message: what this call got for the previous response."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return list(reversed(results))


def _turn_results(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """``(tool name, result)`` of every result since the turn's last user message."""
    start = 0
    for index, message in enumerate(messages):
        if isinstance(message, HumanMessage):
            start = index + 1
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in messages[start:]:
        if isinstance(message, AIMessage):
            names.update({call["id"] or "": call["name"] for call in message.tool_calls})
        elif isinstance(message, ToolMessage):
            name = message.name or names.get(message.tool_call_id, "")
            results.append((name, _content_text(message)))
    return results


def _response_message(
    response: ModelTurn, position: int, messages: Sequence[BaseMessage]
) -> AIMessage:
    usage = cast(Any, dict(SCRIPTED_USAGE_METADATA))
    if response.tool_calls:
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": spec.tool_name,
                    "args": dict(spec.arguments),
                    "id": scripted_tool_call_id(spec, position, index),
                    "type": "tool_call",
                }
                for index, spec in enumerate(response.tool_calls)
            ],
            usage_metadata=usage,
            response_metadata={"model_name": SCRIPTED_MODEL_NAME, "finish_reason": "tool_calls"},
        )
    text = scripted_answer_text(response, lambda: _turn_results(messages))
    return AIMessage(
        content=text,
        usage_metadata=usage,
        response_metadata={"model_name": SCRIPTED_MODEL_NAME, "finish_reason": "stop"},
    )


class ScenarioLangChainTool(BaseTool):
    """A ``ScenarioTool`` as a LangChain tool that takes any JSON object."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scenario: ScenarioTool
    state_directory: Path

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError("scenario tools are async only; call ainvoke")

    async def _arun(self, *args: Any, config: RunnableConfig, **kwargs: Any) -> str:
        execution = tool_execution_of(config)
        kwargs.pop("run_manager", None)
        tool = self.scenario
        if tool.question is None:
            return await run_scenario_tool(
                tool,
                json.dumps(kwargs, sort_keys=True),
                state_directory=self.state_directory,
                idempotency_key=idempotency_key_of(config),
                attempt=execution.attempt if execution is not None else 1,
            )
        # LangGraph's own way to ask: the session asks the user, and the rerun resumes
        # this interrupt() with the answer.
        answer = interrupt(
            {
                "question": tool.question,
                "choices": list(tool.choices) if tool.choices is not None else None,
                "continuation": tool.continuation,
            }
        )
        outcome = await scenario_tool_outcome(
            tool,
            json.dumps(kwargs, sort_keys=True),
            state_directory=self.state_directory,
            idempotency_key=idempotency_key_of(config),
            attempt=execution.attempt if execution is not None else 1,
            input_answers=(str(answer),),
            input_continuation=execution.tool_call.input_continuation if execution else None,
        )
        assert isinstance(outcome, str)
        return outcome


_ANY_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": True,
}


def scenario_tool(tool: ScenarioTool, state_directory: Path) -> BaseTool:
    """``tool`` as a LangChain tool declaring the scenario's effect and approval."""
    langchain_tool = ScenarioLangChainTool(
        name=tool.name,
        description=tool.description,
        args_schema=_ANY_OBJECT_SCHEMA,
        scenario=tool,
        state_directory=state_directory,
    )
    return declare_tool_effect(
        langchain_tool, tool.effect, requires_approval=tool.requires_approval
    )
