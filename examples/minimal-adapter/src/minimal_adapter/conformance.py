"""The adapter's scenario factory for the conformance suite: the script as an HTTP endpoint.

``build_flow`` (``minimal_adapter.conformance:build_flow``) serves the suite's
``ModelScript`` as the Chat Completions endpoint on an ``httpx.MockTransport``
and turns each ``ScenarioTool`` into a ``ChatTool`` that declares its effect.
The endpoint learns the turn and attempt from ``get_model_step_context()``
(the runner serves its model step) and the position in the turn from the request
itself: how many assistant messages follow the turn's user message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from dex_agents import AgentSessionFlow, create_agent_session_flow
from dex_agents.runner import (
    ToolInputRequested,
    get_deferred_tool_execution,
    get_model_step_context,
)
from dex_agents.testing import (
    ModelScript,
    ScenarioSession,
    ScenarioTool,
    play_scripted_model_call,
    scenario_tool_outcome,
    scripted_answer_text,
    scripted_tool_call_id,
)
from dex_agents_conformance import ALL_CAPABILITIES, Capability
from minimal_adapter._runner import ChatRunner, ChatTool

__all__ = ["CAPABILITIES", "UNSUPPORTED", "build_flow"]

CAPABILITIES = ALL_CAPABILITIES | {Capability.TOOL_INPUT_REQUESTS}
"""What this runner does: not the opt-in compaction and tool tasks, which it does not
implement; named one by one, so a capability added to the suite later is not claimed."""
UNSUPPORTED = {
    Capability.PLANNING_TOOL_CHOICE: "the example sends no tool_choice; a planning turn"
    " offers only write_todos and the model decides",
    Capability.SESSION_MODELS: "the example runs one model name; an adapter would map"
    " turn.session_settings to the model of each request",
    Capability.MCP_TOOLS: "the example keeps to the required runner contract, with no"
    " poll_tool_task or cancel_tool_task; an adapter wraps an McpToolSource's tools so they"
    " call source.call_tool and names the source as their tool task poller, as the four"
    " adapters' mcp_source_tools do",
}
"""Why the example leaves these out, for the suite's skip reasons."""


def _this_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[last_user + 1 :]


def _line(message: dict[str, Any]) -> str:
    if message["role"] == "tool":
        return f"tool {message['name']}: {message['content']}"
    tool_calls: list[dict[str, Any]] = message.get("tool_calls") or []
    calls = ", ".join(call["function"]["name"] for call in tool_calls)
    return f"{message['role']}: {message.get('content') or ''}{' -> ' + calls if calls else ''}"


class ScriptedEndpoint:
    """``POST /v1/chat/completions`` answering from the script; stateless, like a real API."""

    def __init__(self, script: ModelScript, state_directory: Path) -> None:
        self._script, self._state_directory = script, state_directory

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        messages: list[dict[str, Any]] = json.loads(request.content)["messages"]
        turn_messages = _this_turn(messages)
        position = sum(1 for m in turn_messages if m["role"] == "assistant")
        results = [m for m in turn_messages if m["role"] == "tool"]
        latest: list[
            dict[str, Any]
        ] = []  # the results of the previous response: the messages after its calls
        for message in reversed(turn_messages):
            if message["role"] != "tool":
                break
            latest.insert(0, message)
        turn = get_model_step_context()
        response = await play_scripted_model_call(
            self._script,
            self._state_directory,
            turn_id=turn.turn_id,
            position=position,
            attempt=turn.attempt,
            history=[_line(m) for m in messages],
            tool_results={m["tool_call_id"]: m["content"] for m in latest},
            write_text=turn.events.write_text_delta,
        )
        calls = [
            {
                "id": scripted_tool_call_id(spec, position, index),
                "type": "function",
                "function": {"name": spec.tool_name, "arguments": json.dumps(dict(spec.arguments))},
            }
            for index, spec in enumerate(response.tool_calls)
        ]
        text = None
        if not calls:
            text = scripted_answer_text(
                response, lambda: [(m["name"], m["content"]) for m in results]
            )
        body = {
            "id": f"response-{turn.turn_id}-{position}",
            "model": "scripted",
            "choices": [
                {
                    "message": {"content": text, "tool_calls": calls or None},
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
        return httpx.Response(200, json=body)


def _chat_tool(tool: ScenarioTool, state_directory: Path) -> ChatTool:
    async def run(arguments: dict[str, Any]) -> str | ToolInputRequested:
        call = get_deferred_tool_execution()
        return await scenario_tool_outcome(
            tool,
            json.dumps(arguments),
            state_directory=state_directory,
            idempotency_key=call.idempotency_key,
            attempt=call.attempt,
            input_answers=call.input_answers,
            input_continuation=call.tool_call.input_continuation,
        )

    return ChatTool(
        tool.name, tool.description, {"type": "object"}, run, tool.effect, tool.requires_approval
    )


def build_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The scenario factory ``(script, tools, state_directory, session) -> Flow``."""
    directory = Path(state_directory)
    transport = httpx.MockTransport(ScriptedEndpoint(script, directory))
    client = httpx.AsyncClient(transport=transport, base_url="https://model.invalid")
    runner = ChatRunner("scripted", [_chat_tool(tool, directory) for tool in tools], client)
    return create_agent_session_flow(
        runner,
        session.flow_type,  # exactly this Flow type
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        # No tool_policies: each ChatTool declares its own effect, and the suite checks it.
    )
