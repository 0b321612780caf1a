"""The conformance suite's hook for the Claude adapter: the scenario factory and the
scripted Messages endpoint that plays the suite's neutral scripts.

``build_conformance_flow`` serves the neutral ``ModelScript`` from a Messages
API endpoint on ``httpx2.MockTransport`` (``ScriptedMessagesEndpoint``), built
inside the factory so that Worker child processes, which import the factory by
path and read the script from the state directory, build their own:
``dex_agents_claude_sdk.conformance:build_conformance_flow``. ``scenario_tool``
turns a ``ScenarioTool`` into a ``ClaudeTool`` with the scenario's effect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx2

from dex_agents import AgentSessionFlow
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    ToolInputRequested,
    decode_model_call_count,
    estimate_text_tokens,
    get_deferred_tool_execution,
    get_model_step_context,
)
from dex_agents.testing import (
    DEFAULT_SCENARIO_MODEL,
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ScenarioTool,
    ScriptedModelFailure,
    ToolChoice,
    play_scripted_model_call,
    play_scripted_summary,
    scenario_model_name,
    scenario_tool_outcome,
    scripted_answer_text,
    scripted_tool_call_id,
    with_scenario_mcp_tools,
)
from dex_agents_claude_sdk import (
    ClaudeTool,
    claude_tool,
    create_claude_session_flow,
    mcp_source_tools,
)
from dex_agents_claude_sdk.testing import (
    SCRIPTED_MODEL,
    error_response,
    mock_client_factory,
    response_message,
    sse_response,
)

__all__ = [
    "CONFORMANCE_FACTORY",
    "ScriptedMessagesEndpoint",
    "build_conformance_flow",
    "scenario_tool",
]

JsonObject = dict[str, Any]

CONFORMANCE_FACTORY = "dex_agents_claude_sdk.conformance:build_conformance_flow"
SCRIPTED_MAX_TOKENS = 128


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """A session Flow over the real SDK talking to a scripted Messages endpoint.

    ``resolve_model`` names one of the session's scripted models
    (``ScenarioSession.session_models``) as the request's model, from the turn's session
    settings; the endpoint records the model each request names.
    """
    directory = Path(state_directory)

    def resolve_model(settings: Mapping[str, Any]) -> str | None:
        name = scenario_model_name(settings, session.session_models)
        return None if name == DEFAULT_SCENARIO_MODEL else name

    scenario_tools = [scenario_tool(tool, directory) for tool in tools]
    claude_tools, tool_tasks = with_scenario_mcp_tools(
        session, tools, directory, scenario_tools, mcp_source_tools
    )
    return create_claude_session_flow(
        SCRIPTED_MODEL,
        session.flow_type,
        tools=claude_tools,
        client_factory=mock_client_factory(
            ScriptedMessagesEndpoint(script, directory, session.summary_gate)
        ),
        tool_tasks=tool_tasks,
        planning_tool_choice=session.planning_tool_choice,
        resolve_model=resolve_model if session.session_models else None,
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        # The scripted answers are short; a summary call's input budget is the context
        # window less max_tokens, so the scenarios' small windows need a small reply.
        max_tokens=SCRIPTED_MAX_TOKENS,
        **session.storage_options(),
    )


# --- the scripted Messages endpoint and the scenario tools --------------------------


class ScriptedMessagesEndpoint:
    """Plays a ``ModelScript`` as the Messages API (an async ``MockTransport`` handler).

    The turn and attempt come from ``get_model_step_context()``, which the
    runner sets while it sends a request, and the model call index from the
    turn's framework run state. Each request is recorded
    with ``record_model_call``; a gated response writes ``text_before_gate`` as a
    live text delta (not part of the answer) and waits on its ``FileGate``; a
    failing attempt answers HTTP 500, which the SDK raises as an API error.
    """

    def __init__(
        self, script: ModelScript, state_directory: Path, summary_gate: str | None = None
    ) -> None:
        self.script = script
        self.state_directory = Path(state_directory)
        self.summary_gate = summary_gate

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body: JsonObject = json.loads(request.content)
        if request.url.path.endswith("/count_tokens"):
            # The scripted endpoint counts one token per four characters of the request.
            return httpx2.Response(
                200, json={"input_tokens": estimate_text_tokens(request.content.decode())}
            )
        if body.get("system") == CONTEXT_SUMMARY_INSTRUCTIONS:
            # The summary call of summarize_context, which runs outside a model step.
            lines = [_content_text(m) for m in cast(list[JsonObject], body["messages"])]
            text = await play_scripted_summary(
                self.state_directory, self.summary_gate, lines, model=_scenario_model(body)
            )
            return httpx2.Response(200, json=response_message([{"type": "text", "text": text}]))
        try:
            turn = get_model_step_context()
        except LookupError:
            raise RuntimeError(
                "ScriptedMessagesEndpoint answers only requests of ClaudeRunner"
            ) from None
        position = decode_model_call_count(turn.framework_run_state)
        messages = cast(list[JsonObject], body["messages"])
        try:
            response = await play_scripted_model_call(
                self.script,
                self.state_directory,
                turn_id=turn.turn_id,
                position=position,
                attempt=turn.attempt,
                history=[line for message in messages for line in _history_lines(message)],
                tool_results=_last_results(messages),
                write_text=turn.events.write_text_delta,
                model=_scenario_model(body),
                offered_tools=[str(tool["name"]) for tool in body.get("tools", [])],
                tool_choice=_tool_choice(body),
            )
        except ScriptedModelFailure as failure:
            # The API's way to fail a request: the SDK raises it, and RunModel is retried.
            return error_response(500, "api_error", str(failure))
        message = response_message(
            _content(response, position, messages),
            message_id=f"msg_{turn.turn_id}_{position}",
        )
        return sse_response(message) if body.get("stream") else httpx2.Response(200, json=message)


def _scenario_model(body: Mapping[str, Any]) -> str:
    """The scripted model a request names: the runner's own model is the default one."""
    model = str(body["model"])
    return DEFAULT_SCENARIO_MODEL if model == SCRIPTED_MODEL else model


def _tool_choice(body: Mapping[str, Any]) -> ToolChoice:
    """The request's ``tool_choice`` as the suite records it: ``any`` or a named ``tool``
    must call a tool."""
    choice = cast(Mapping[str, Any], body.get("tool_choice") or {"type": "auto"})
    kind = choice.get("type")
    if kind in ("any", "tool"):
        return "required"
    return "none" if kind == "none" else "auto"


def _blocks(message: Mapping[str, Any]) -> list[JsonObject]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in cast(list[Any], content) if isinstance(b, dict)]


def _content_text(message: Mapping[str, Any]) -> str:
    return "".join(str(block.get("text", "")) for block in _blocks(message))


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in cast(list[JsonObject], content))


def _history_lines(message: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            lines.append(f"{message['role']}: {block['text']}")
        elif kind == "tool_use":
            lines.append(f"assistant: -> {block['name']}")
        elif kind == "tool_result":
            lines.append(f"tool {block['tool_use_id']}: {_result_text(block)}")
    return lines


def _last_results(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The ``tool_result`` blocks answering the last response: what this call got for it."""
    if not messages or messages[-1]["role"] != "user":
        return {}
    return {
        str(b["tool_use_id"]): _result_text(b)
        for b in _blocks(messages[-1])
        if b.get("type") == "tool_result"
    }


def _turn_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(tool name, result)`` of every result since the turn's user message."""
    start = 0
    for index, message in enumerate(messages):
        if message["role"] == "user" and any(b.get("type") == "text" for b in _blocks(message)):
            start = index + 1
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in messages[start:]:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                names[str(block["id"])] = str(block["name"])
            elif block.get("type") == "tool_result":
                tool_use_id = str(block["tool_use_id"])
                results.append((names.get(tool_use_id, tool_use_id), _result_text(block)))
    return results


def _content(
    response: ModelTurn, position: int, messages: Sequence[Mapping[str, Any]]
) -> list[JsonObject]:
    if response.tool_calls:
        return [
            {
                "type": "tool_use",
                "id": scripted_tool_call_id(spec, position, index),
                "name": spec.tool_name,
                "input": dict(spec.arguments),
            }
            for index, spec in enumerate(response.tool_calls)
        ]
    text = scripted_answer_text(response, lambda: _turn_results(messages))
    return [{"type": "text", "text": text}]


_ANY_OBJECT_SCHEMA: JsonObject = {"type": "object", "properties": {}, "additionalProperties": True}


def scenario_tool(tool: ScenarioTool, state_directory: Path) -> ClaudeTool:
    """``tool`` as a Claude tool (``claude_tool``, an SDK ``beta_async_tool``) with the
    scenario's effect."""
    directory = Path(state_directory)

    async def run(**arguments: Any) -> str | ToolInputRequested:
        execution = get_deferred_tool_execution()
        # A tool with a question returns ToolInputRequested until the rerun has its answer.
        return await scenario_tool_outcome(
            tool,
            json.dumps(arguments, sort_keys=True),
            state_directory=directory,
            idempotency_key=execution.idempotency_key,
            attempt=execution.attempt,
            input_answers=execution.input_answers,
            input_continuation=execution.tool_call.input_continuation,
        )

    return claude_tool(
        run,
        effect=tool.effect,
        requires_approval=tool.requires_approval,
        name=tool.name,
        description=tool.description,
        input_schema=_ANY_OBJECT_SCHEMA,
    )
