"""``ScriptedRunner``: an ``AgentFrameworkRunner`` that plays a ``ModelScript``.

It is the core's own "framework" for the conformance suite and the benchmarks:
a minimal message format, the script as the model, and scenario tools as the
tools. It keeps no state between calls. The user turn number comes from the
turn ID and the position in the turn from the framework run state, so a model
call that reruns after a crash gives the same answer.

Every model call is recorded in the state directory's ``model-calls.jsonl``
(an ``InvocationLog`` with tool name ``"model"``) with what the model saw: the
history, the tool results, the tools offered and the tool choice, and the name of
the scripted model the turn's session settings chose (``session_models``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Literal, cast

from dex_agents._adapter_support import resolve_declared_tool_policy
from dex_agents._builtin_tools import WRITE_TODOS
from dex_agents._contract import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
)
from dex_agents._texts import describe_tool_call_outcome
from dex_agents._tool_task_routing import (
    ToolTaskForwarding,
    ToolTaskPollers,
    returning_started_task,
)
from dex_agents._values import AgentUsage, FrameworkMessage, InteractionMode, from_wire, to_wire
from dex_agents.testing._mcp_scenarios import ScenarioMcpTools
from dex_agents.testing._scenario_tasks import ScenarioTaskPoller
from dex_agents.testing._script_playback import (
    ScriptedModelFailure,
    play_scripted_model_call,
    scripted_answer_text,
    scripted_tool_call_id,
)
from dex_agents.testing._scripts import (
    ModelScript,
    ModelTurn,
    ScenarioTool,
    ToolChoice,
    scenario_model_name,
    scenario_tool_outcome,
)

__all__ = ["SCRIPTED_USAGE", "ScriptedModelFailure", "ScriptedRunner"]

SCRIPTED_USAGE = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5, total_tokens=15)


def _user_item(text: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="user", text=text, framework_item=json.dumps({"role": "user", "text": text})
    )


def _assistant_item(
    text: str | None, calls: Sequence[DeferredToolCall] = ()
) -> list[FrameworkMessage]:
    item = json.dumps(
        {
            "role": "assistant",
            "text": text,
            "tool_calls": [
                {"id": c.tool_call_id, "name": c.tool_name, "arguments": c.arguments} for c in calls
            ],
        }
    )
    if not calls:
        return [FrameworkMessage(role="assistant", text=text, framework_item=item)]
    # One display message per requested call, as frameworks that split them do;
    # only the first carries the framework item that replays the whole response.
    return [
        FrameworkMessage(
            role="assistant",
            text=None,
            tool_call_id=c.tool_call_id,
            tool_name=c.tool_name,
            tool_arguments=c.arguments,
            framework_item=item if index == 0 else json.dumps({"role": "assistant_part"}),
        )
        for index, c in enumerate(calls)
    ]


def _tool_item(tool_call_id: str, tool_name: str, output: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="tool",
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        tool_output=output,
        framework_item=json.dumps(
            {"role": "tool", "tool_call_id": tool_call_id, "tool_name": tool_name, "output": output}
        ),
    )


class ScriptedRunner(ToolTaskForwarding):
    """Plays ``script`` as the model and ``tools`` as the tools; see the module docstring.

    A ``STARTS_TASK`` tool's task is polled by ``ScenarioTaskPoller``.
    """

    supports_plan_mode = True
    """The scripted model sees no tool list, so a planning turn offers it nothing else."""

    def __init__(
        self,
        script: ModelScript,
        tools: Sequence[ScenarioTool],
        state_directory: Path,
        *,
        planning_tool_choice: Literal["auto", "required"] = "auto",
        session_models: Sequence[str] = (),
        mcp_tools: ScenarioMcpTools | None = None,
    ) -> None:
        """``mcp_tools`` adds MCP tools (``scenario_mcp_tools``): offered by name and run
        through their source's ``execute_deferred_tool_call``, the core's path for a
        runner, whose tasks the source polls and cancels."""
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario tool names must be unique: {names}")
        self.script = script
        self.tools = {tool.name: tool for tool in tools}
        self.state_directory = Path(state_directory)
        self.planning_tool_choice: Literal["auto", "required"] = planning_tool_choice
        self.session_models = tuple(session_models)
        self.mcp_tools = mcp_tools
        self._mcp_by_name = {t.name: t for t in mcp_tools.tools} if mcp_tools is not None else {}
        poller = ScenarioTaskPoller(tools, self.state_directory)
        self.tool_tasks = ToolTaskPollers(
            poller if mcp_tools is None else mcp_tools.tool_tasks(poller, tools)
        )

    def build_user_message(self, text: str) -> FrameworkMessage:
        return _user_item(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        position, turn_items, pending_calls = self._restore(turn)
        seen_results = self._tool_results(turn, pending_calls)
        turn_items = [*turn_items, *seen_results]
        history = self._replayed_history(turn)
        response = await play_scripted_model_call(
            self.script,
            self.state_directory,
            turn_id=turn.turn_id,
            position=position,
            attempt=turn.attempt,
            history=history,
            tool_results={m.tool_call_id or "": m.tool_output or "" for m in seen_results},
            write_text=turn.events.write_text_delta,
            model=scenario_model_name(turn.session_settings, self.session_models),
            offered_tools=self._offered_tools(turn),
            tool_choice=self._tool_choice(turn, position),
        )
        if response.tool_calls:
            calls = self._deferred_calls(turn, response, position)
            items = [*turn_items, *_assistant_item(None, calls)]
            state = json.dumps(
                {
                    "position": position + 1,
                    "items": [to_wire(m) for m in items],
                    "pending_calls": [{"id": c.tool_call_id, "name": c.tool_name} for c in calls],
                }
            )
            return ToolCallsRequested(
                framework_run_state=state, tool_calls=calls, usage=SCRIPTED_USAGE
            )
        text = scripted_answer_text(
            response,
            lambda: [
                (str(m.tool_name), str(m.tool_output)) for m in turn_items if m.role == "tool"
            ],
        )
        turn.events.write_text_delta(text)
        return TurnCompleted(
            new_messages=[*turn_items, *_assistant_item(text)], usage=SCRIPTED_USAGE
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        if self.mcp_tools is not None and call.tool_call.tool_name in self._mcp_by_name:
            return await self.mcp_tools.source.execute_deferred_tool_call(call)
        tool = self.tools.get(call.tool_call.tool_name)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {call.tool_call.tool_name!r}")
        output = scenario_tool_outcome(
            tool,
            call.tool_call.arguments,
            state_directory=self.state_directory,
            idempotency_key=call.idempotency_key,
            attempt=call.attempt,
            input_answers=call.input_answers,
            input_continuation=call.tool_call.input_continuation,
        )
        return await returning_started_task(_result(output))

    def _offered_tools(self, turn: AgentTurnContext) -> list[str]:
        """What a framework would offer: only ``write_todos`` in a planning turn."""
        if turn.interaction_mode is InteractionMode.PLANNING:
            return [name for name in turn.enabled_built_in_tools if name == WRITE_TODOS]
        return [*self.tools, *self._mcp_by_name, *turn.enabled_built_in_tools]

    def _tool_choice(self, turn: AgentTurnContext, position: int) -> ToolChoice:
        """``required`` on a planning turn's first model call while no draft exists."""
        draft = turn.plan is not None and turn.plan.status == "draft"
        planning = turn.interaction_mode is InteractionMode.PLANNING
        if self.planning_tool_choice == "required" and planning and position == 0 and not draft:
            return "required"
        return "auto"

    @staticmethod
    def _restore(
        turn: AgentTurnContext,
    ) -> tuple[int, list[FrameworkMessage], list[dict[str, str]]]:
        """Position in the turn, the turn's messages so far, and the calls awaiting results."""
        if turn.framework_run_state is None:
            return 0, [], []
        state = json.loads(turn.framework_run_state)
        items = [from_wire(FrameworkMessage, item) for item in state["items"]]
        return int(state["position"]), items, cast(list[dict[str, str]], state["pending_calls"])

    @staticmethod
    def _tool_results(
        turn: AgentTurnContext, pending_calls: list[dict[str, str]]
    ) -> list[FrameworkMessage]:
        """Results of the previous response's calls, from their final records."""
        results: list[FrameworkMessage] = []
        for call in pending_calls:
            record = turn.recorded_tool_call(call["id"])
            if record is None:
                raise RuntimeError(f"the session has no record of tool call {call['id']!r}")
            results.append(_tool_item(call["id"], call["name"], describe_tool_call_outcome(record)))
        return results

    @staticmethod
    def _replayed_history(turn: AgentTurnContext) -> list[str]:
        """The stored messages as the model reads them: from framework items only."""
        history: list[str] = []
        for message in turn.messages:
            item = json.loads(message.framework_item)
            role = item.get("role")
            if role == "user":
                history.append(f"user: {item['text']}")
            elif role == "assistant":
                calls = ", ".join(call["name"] for call in item["tool_calls"])
                history.append(f"assistant: {item['text'] or ''}{' -> ' + calls if calls else ''}")
            elif role == "tool":
                history.append(f"tool {item['tool_name']}: {item['output']}")
        return history

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls: list[DeferredToolCall] = []
        for index, spec in enumerate(response.tool_calls):
            tool = self.tools.get(spec.tool_name)
            mcp_tool = self._mcp_by_name.get(spec.tool_name)
            effect = tool.effect if tool is not None else None
            if mcp_tool is not None:
                effect = mcp_tool.effect
            calls.append(
                DeferredToolCall(
                    tool_call_id=scripted_tool_call_id(spec, position, index),
                    tool_name=spec.tool_name,
                    arguments=json.dumps(dict(spec.arguments), sort_keys=True),
                    # The scenario tool's effect and approval are this framework's own
                    # declaration; a session ToolPolicy for the name wins over them.
                    policy=resolve_declared_tool_policy(
                        turn,
                        spec.tool_name,
                        effect,
                        tool.requires_approval if tool is not None else None,
                    ),
                )
            )
        return calls


async def _result(output: Awaitable[str | ToolInputRequested]) -> DeferredToolOutcome:
    outcome = await output
    return outcome if isinstance(outcome, ToolInputRequested) else ToolExecutionResult(outcome)
