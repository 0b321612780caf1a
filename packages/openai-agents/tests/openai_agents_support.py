"""A committed-state stand-in for the session: drives the runner's three operations directly.

``Session`` stores outcomes as the session Flow would (messages, run state,
records) and builds each ``AgentTurnContext`` from that state only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from dex_agents import (
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    DeferredToolExecution,
    FrameworkMessage,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents_openai_agents import OpenAIAgentsRunner


class RecordingEvents:
    turn_id = "turn-1"
    attempt = 1

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []

    def write_text_delta(self, text: str) -> None:
        self.text.append(text)

    def write_reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None: ...
    def write_tool_call_finished(self, tool_call_id: str, tool_name: str, status: Any) -> None: ...
    def write_event(self, type: str, payload: Any) -> None: ...


class NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def no_heartbeat() -> None:
    return None


async def no_checkpoint(text: str) -> None:
    return None


class Session:
    """Committed state as the session keeps it, for one runner."""

    def __init__(
        self,
        runner: OpenAIAgentsRunner,
        *,
        policies: dict[str, ToolPolicy] | None = None,
        default_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
        built_ins: tuple[str, ...] = (),
    ) -> None:
        self.runner = runner
        self.messages: list[AgentMessage] = []
        self.records: list[AgentToolCall] = []
        self.run_state: str | None = None
        self.turn = 0
        self.policies = policies or {}
        self.default_effect = default_effect
        self.built_ins = built_ins
        self.events = RecordingEvents()

    def store(self, messages: Sequence[FrameworkMessage]) -> None:
        for message in messages:
            self.messages.append(
                AgentMessage.from_framework_message(
                    message, sequence=len(self.messages) + 1, turn_id=f"turn-{self.turn}"
                )
            )

    def start_turn(self, text: str) -> None:
        self.turn += 1
        self.records = []
        self.run_state = None
        self.store([self.runner.build_user_message(text)])

    def context(self, attempt: int = 1) -> AgentTurnContext:
        return AgentTurnContext(
            flow_id="s-1",
            turn_id=f"turn-{self.turn}",
            attempt=attempt,
            messages=tuple(self.messages),
            framework_run_state=self.run_state,
            tool_calls=tuple(self.records),
            events=self.events,
            cancellation=NotCancelled(),
            deadline=datetime(2030, 1, 1, tzinfo=UTC),
            step_execution_id="step-1",
            tool_policies=self.policies,
            default_tool_effect=self.default_effect,
            heartbeat=no_heartbeat,
            enabled_built_in_tools=self.built_ins,
        )

    async def run_model(self) -> TurnCompleted | ToolCallsRequested:
        outcome = await self.runner.run_model_step(self.context())
        self.store(outcome.new_messages)
        if isinstance(outcome, ToolCallsRequested):
            self.run_state = outcome.framework_run_state
            for call in outcome.tool_calls:
                self.records.append(
                    AgentToolCall(
                        tool_call_id=call.tool_call_id,
                        turn_id=f"turn-{self.turn}",
                        tool_name=call.tool_name,
                        arguments=call.arguments,
                        effect=call.policy.effect,
                        requires_approval=call.policy.requires_approval,
                        status=AgentToolCallStatus.APPROVED,
                        deferral_order=len(self.records),
                        tool_source_reference=call.tool_source_reference,
                    )
                )
        else:
            self.run_state = None
        return outcome

    def reject(self, tool_call_id: str, message: str | None) -> None:
        self.records = [
            replace(r, status=AgentToolCallStatus.REJECTED, rejection_message=message)
            if r.tool_call_id == tool_call_id
            else r
            for r in self.records
        ]

    async def run_tools(self) -> None:
        finished: list[AgentToolCall] = []
        for record in self.records:
            if record.is_final:
                finished.append(record)
                continue
            try:
                result = await self.runner.execute_deferred_tool_call(self.execution(record))
                assert isinstance(result, ToolExecutionResult)
                finished.append(
                    replace(record, status=AgentToolCallStatus.SUCCEEDED, output=result.output)
                )
            except ToolExecutionError as error:
                finished.append(
                    replace(record, status=AgentToolCallStatus.FAILED, error=error.message)
                )
        self.records = finished

    def execution(self, record: AgentToolCall, attempt: int = 1) -> DeferredToolExecution:
        return DeferredToolExecution(
            flow_id="s-1",
            tool_call=record,
            idempotency_key=f"s-1/{record.turn_id}/{record.tool_call_id}",
            attempt=attempt,
            events=self.events,
            cancellation=NotCancelled(),
            deadline=datetime(2030, 1, 1, tzinfo=UTC),
            heartbeat=no_heartbeat,
            heartbeat_checkpoint=None,
            save_heartbeat_checkpoint=no_checkpoint,
        )

    def items(self) -> list[dict[str, Any]]:
        return [json.loads(message.framework_item) for message in self.messages]
