"""A dex-agents runner on a small Chat-Completions-like API: the whole adapter.

The API takes ``{"model", "messages", "tools"}`` at ``POST /v1/chat/completions``
and answers with one ``choices[0].message`` that has ``content`` or ``tool_calls``
and a ``usage``. Each API message is one ``framework_item``; the runner keeps the
turn's unstored messages in its run state and stores them all with the answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from dex_agents import ToolEffect
from dex_agents.runner import (
    WRITE_TODOS,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ResolvedToolPolicy,
    ToolCallDisplay,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    answer_tool_call,
    call_policy,
    check_model_tool_call_id,
    enabled_builtin_tool_definitions,
    is_display_only,
    known_tool,
    model_call_metadata,
    response_messages,
    serving_deferred_tool_execution,
    serving_model_step,
    single_response_usage,
    tool_arguments_object,
)
from dex_agents.values import FrameworkMessage, InteractionMode

Json = dict[str, Any]


@dataclass(frozen=True)
class ChatTool:
    """A tool: its schema, its body, and the effect it declares (a session policy wins)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[Json], Awaitable[str | ToolInputRequested]]
    effect: ToolEffect | None = None
    requires_approval: bool | None = None


def _spec(name: str, description: str, parameters: Mapping[str, Any]) -> Json:
    function = {"name": name, "description": description, "parameters": dict(parameters)}
    return {"type": "function", "function": function}


def _calls(message: Json) -> list[Json]:
    return message.get("tool_calls") or []


def _stored(item: Json) -> list[FrameworkMessage]:
    """One API message as stored messages, display fields as the runner contract defines."""
    raw = json.dumps(item)
    if item["role"] == "tool":
        return [
            FrameworkMessage(
                role="tool",
                framework_item=raw,
                tool_call_id=item["tool_call_id"],
                tool_name=item["name"],
                tool_output=item["content"],
            )
        ]
    displays = [
        ToolCallDisplay(c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in _calls(item)
    ]
    return response_messages(raw, text=item.get("content"), tool_calls=displays)


class ChatRunner:
    """``AgentFrameworkRunner`` over the API; keeps no state between calls."""

    supports_plan_mode = True

    def __init__(self, model: str, tools: Sequence[ChatTool], client: httpx.AsyncClient) -> None:
        self._model, self._client = model, client
        self._tools = {tool.name: tool for tool in tools}

    def build_user_message(self, text: str) -> FrameworkMessage:
        item = {"role": "user", "content": text}
        return FrameworkMessage(role="user", text=text, framework_item=json.dumps(item))

    def _offered(self, turn: AgentTurnContext) -> list[Json]:
        built_in = enabled_builtin_tool_definitions(turn.enabled_built_in_tools)
        offered = [_spec(d.name, d.description, d.parameters) for d in built_in]
        if turn.interaction_mode is InteractionMode.PLANNING:  # a planning turn: write_todos only
            return [s for s in offered if s["function"]["name"] == WRITE_TODOS]
        own = [_spec(t.name, t.description, t.parameters) for t in self._tools.values()]
        return own + offered

    def _policy(self, turn: AgentTurnContext, name: str) -> ResolvedToolPolicy:
        # Built-in tools, then the session's ToolPolicy, then the tool's declaration, then
        # the session default, also for a name we have no tool of (known_tool fails it).
        tool = self._tools.get(name)
        if tool is None:
            return call_policy(turn, name, known=False)
        return call_policy(
            turn,
            name,
            known=True,
            declared_effect=tool.effect,
            declared_approval=tool.requires_approval,
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        # The turn's messages not stored yet: our run state, plus the results of the calls
        # the last response asked for, from their final records.
        unstored: list[Json] = json.loads(turn.framework_run_state or "[]")
        for call in _calls(unstored[-1]) if unstored else []:
            name, text = call["function"]["name"], answer_tool_call(turn, call["id"]).text
            unstored.append(
                {"role": "tool", "tool_call_id": call["id"], "name": name, "content": text}
            )
        stored = [
            json.loads(m.framework_item)
            for m in turn.messages
            if not is_display_only(m.framework_item)
        ]
        request = {
            "model": self._model,
            "messages": stored + unstored,
            "tools": self._offered(turn),
        }
        with serving_model_step(turn):  # model code (a scripted endpoint) can read the turn
            response = await self._client.post("/v1/chat/completions", json=request)
        response.raise_for_status()  # an HTTP error fails the attempt: RunModel retries it
        body: Json = response.json()
        choice = body["choices"][0]
        message: Json = {"role": "assistant", **choice["message"]}
        usage = single_response_usage(
            input_tokens=body["usage"]["prompt_tokens"],
            output_tokens=body["usage"]["completion_tokens"],
        )
        metadata = model_call_metadata(
            request_model=self._model,
            response_model=body.get("model"),
            response_id=body.get("id"),
            finish_reasons=[choice["finish_reason"]],
        )
        calls = [
            DeferredToolCall(
                tool_call_id=check_model_tool_call_id(c["function"]["name"], c.get("id")),
                tool_name=c["function"]["name"],
                arguments=c["function"]["arguments"],
                policy=self._policy(turn, c["function"]["name"]),
            )
            for c in _calls(message)
        ]
        if calls:
            return ToolCallsRequested(
                framework_run_state=json.dumps([*unstored, message]),
                tool_calls=calls,
                usage=usage,
                model_call_metadata=metadata,
            )
        if message.get("content"):
            turn.events.write_text_delta(message["content"])
        new_messages = [stored for item in [*unstored, message] for stored in _stored(item)]
        return TurnCompleted(new_messages=new_messages, usage=usage, model_call_metadata=metadata)

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution
    ) -> ToolExecutionResult | ToolInputRequested:
        tool = known_tool(self._tools, call.tool_call.tool_name)
        arguments = tool_arguments_object(call.tool_call.arguments)
        with serving_deferred_tool_execution(call):  # the tool reads get_deferred_tool_execution()
            output = await tool.run(arguments)
        return output if isinstance(output, ToolInputRequested) else ToolExecutionResult(output)
