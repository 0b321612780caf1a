"""Helpers of the session integration tests: an in-process pull AsyncWorker with a client,
and a small scripted runner whose model replies are functions of the turn."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import dex

from dex_agents import AgentEvent, AgentHost, AgentSessionClient, AgentSnapshot, AgentUsage
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.values import FrameworkMessage


def user_message(text: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="user", framework_item=json.dumps({"type": "user", "text": text}), text=text
    )


def assistant_text(text: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="assistant", framework_item=json.dumps({"type": "assistant", "text": text}), text=text
    )


def assistant_calls(calls: Sequence[tuple[str, str, str]]) -> FrameworkMessage:
    return FrameworkMessage(
        role="assistant",
        framework_item=json.dumps({"type": "calls", "calls": [list(call) for call in calls]}),
    )


def tool_result(tool_call_id: str, tool_name: str, output: str) -> FrameworkMessage:
    return FrameworkMessage(
        role="tool",
        framework_item=json.dumps({"type": "tool", "id": tool_call_id, "output": output}),
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        tool_output=output,
    )


def usage(input_tokens: int = 10, output_tokens: int = 5) -> AgentUsage:
    return AgentUsage(
        model_calls=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def session_id() -> str:
    return f"session-{uuid.uuid4().hex[:12]}"


def calls_then_answer(*calls: tuple[str, str, dict[str, object]]) -> ModelScript:
    """The model asks for every ``(tool_call_id, tool_name, arguments)`` at once, then
    answers with ``<id>=<status>:<result>`` of each call, joined by `` | ``."""

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            deferred = [
                DeferredToolCall(
                    call_id, name, json.dumps(arguments), turn.resolve_tool_policy(name)
                )
                for call_id, name, arguments in calls
            ]
            return ToolCallsRequested(
                framework_run_state="round-1",
                tool_calls=deferred,
                usage=usage(),
                new_messages=[
                    assistant_calls([(c.tool_call_id, c.tool_name, c.arguments) for c in deferred])
                ],
            )
        results = [
            tool_result(r.tool_call_id, r.tool_name, describe_tool_call_outcome(r))
            for r in turn.tool_calls
        ]
        summary = " | ".join(
            f"{r.tool_call_id}={r.status.value}:{describe_tool_call_outcome(r)}"
            for r in turn.tool_calls
        )
        return TurnCompleted(new_messages=[*results, assistant_text(summary)], usage=usage())

    return script


ModelScript = Callable[[AgentTurnContext], Awaitable[AgentTurnOutcome] | AgentTurnOutcome]
ToolFunction = Callable[[DeferredToolExecution], Awaitable[Any]]


@dataclass
class ScriptRunner:
    """A runner whose model is ``script(turn)`` and whose tools are async functions by name."""

    script: ModelScript
    tools: dict[str, ToolFunction] = field(default_factory=dict)
    model_calls: list[AgentTurnContext] = field(default_factory=list)
    tool_runs: list[DeferredToolExecution] = field(default_factory=list)

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self.model_calls.append(turn)
        result = self.script(turn)
        if asyncio.iscoroutine(result):
            return await result
        return result  # type: ignore[return-value]

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> Any:
        self.tool_runs.append(call)
        tool = self.tools[call.tool_call.tool_name]
        result = await tool(call)
        if isinstance(result, str):
            return ToolExecutionResult(result)
        return result


class Harness:
    """An ``AgentHost`` (in-process pull Worker and Client) on one engine, with the
    session calls these tests make."""

    def __init__(
        self, address: str, flows: Sequence[dex.Flow[Any]], *, session_codecs: bool = True
    ) -> None:
        self.address = address
        self.flows = list(flows)
        self.host = AgentHost(self.flows, server_address=address, session_codecs=session_codecs)

    @property
    def client(self) -> dex.AsyncClient:
        return self.host.dex_client

    async def __aenter__(self) -> Harness:
        await self.host.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.host.stop()

    def sessions(self, flow: Any) -> AgentSessionClient:
        return AgentSessionClient(self.client, flow)

    async def start(self, flow: Any, session_id: str, text: str | None) -> None:
        await self.sessions(flow).start_session(session_id, text)

    async def resolve(self, flow: Any, session_id: str, request: Any) -> bool:
        """``resolve_interrupt``, retried on lock conflicts as the contract allows."""
        return await self.sessions(flow).resolve_interrupt(
            session_id, request.interrupt_id, request.approved, request.rejection_message
        )

    async def snapshot(self, flow: Any, session_id: str) -> AgentSnapshot:
        return await self.sessions(flow).snapshot(session_id)

    async def wait_for(
        self,
        flow: Any,
        session_id: str,
        predicate: Callable[[AgentSnapshot], bool],
        *,
        timeout_seconds: float = 60.0,
    ) -> AgentSnapshot:
        return await self.sessions(flow).wait_for_snapshot(
            session_id, predicate, within=timedelta(seconds=timeout_seconds)
        )

    async def wait_for_turns(self, flow: Any, session_id: str, turns: int) -> AgentSnapshot:
        return await self.wait_for(
            flow,
            session_id,
            lambda s: (
                s.state is not None
                and s.state.turn_count >= turns
                and s.state.active_turn_id is None
            ),
        )

    async def events(self, flow: Any, session_id: str) -> list[AgentEvent]:
        collected: list[AgentEvent] = []
        token = ""
        while True:
            page = await self.client.list_stream_messages(session_id, flow.agent_events, 100, token)
            collected.extend(message.value for message in page.messages)
            if not page.next_page_token or not page.messages:
                break
            token = page.next_page_token
        collected.reverse()
        return collected


@dataclass
class CompactingRunner(ScriptRunner):
    """Counts one token per message; keeps the newest ``budget`` messages unsummarized."""

    summaries: list[ContextSummaryRequest] = field(default_factory=list)
    summary_chars: int | None = None
    """Keep only the last this many characters of each summary (a bounded summary)."""

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return len(turn.messages) + (1 if turn.context_summary is not None else 0)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        if len(turn.messages) <= retained_token_budget:
            return None
        return turn.messages[-retained_token_budget - 1].sequence

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        self.summaries.append(request)
        previous = request.previous_summary.summary if request.previous_summary else ""
        texts = " ".join(message.text or "" for message in request.messages)
        summary = f"{previous} {texts}".strip()
        if self.summary_chars is not None:
            summary = summary[-self.summary_chars :]
        return ContextSummaryResult(summary=summary, usage=usage(3, 2))
