"""Drive a runner the way the session does, without an engine: for adapter unit tests.

``RunnerDriver`` keeps what the session would have committed (stored messages,
the turn's framework run state, its tool call records) and builds every
``AgentTurnContext`` and ``DeferredToolExecution`` from that state only, so a
runner that kept state between calls fails its tests. It is the same stand-in
the adapters for Pydantic AI, the OpenAI Agents SDK, LangGraph and Claude each
had their own copy of.

    driver = RunnerDriver(MyRunner(...), policies={"refund": ToolPolicy(ToolEffect.READ)})
    driver.start_turn("Refund order 42")
    outcome = await driver.run_model()          # a ToolCallsRequested
    driver.reject("call-2", "not today")        # or driver.finish(id, status, ...)
    await driver.run_tools()                    # runs every call that is not final
    outcome = await driver.run_model()          # resumes from the records

Set ``driver.session_settings``, ``driver.interaction_mode`` and ``driver.plan`` for the
turns that follow, as the session's settings, plan mode and plan would give them.
Events are recorded in ``driver.events`` (``text``, ``reasoning``, ``other``).
The session's real rules (approvals, retries by effect, deadlines) are not
applied; integration tests on an engine cover those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from dex_agents._contract import (
    AgentFrameworkRunner,
    AgentTurnContext,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents._values import (
    AgentMessage,
    AgentPlan,
    AgentToolCall,
    AgentToolCallStatus,
    FrameworkMessage,
    InteractionMode,
    ToolEffect,
)

__all__ = ["RecordingEventWriter", "RunnerDriver"]

RunnerT = TypeVar("RunnerT", bound=AgentFrameworkRunner)

_FAR_DEADLINE = datetime(2030, 1, 1, tzinfo=UTC)


class RecordingEventWriter:
    """An ``AgentEventWriter`` that keeps what was written, for assertions."""

    def __init__(self) -> None:
        self.turn_id = "turn-0"
        self.attempt = 1
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.other: list[tuple[str, object]] = []

    def write_text_delta(self, text: str) -> None:
        self.text.append(text)

    def write_reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        self.other.append(("tool_call_started", (tool_call_id, tool_name)))

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: AgentToolCallStatus
    ) -> None:
        self.other.append(("tool_call_finished", (tool_call_id, tool_name, status)))

    def write_event(self, type: str, payload: Mapping[str, Any]) -> None:
        self.other.append((type, dict(payload)))


class _NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _no_heartbeat() -> None:
    return None


async def _no_checkpoint(text: str) -> None:
    del text


class RunnerDriver(Generic[RunnerT]):
    """The committed state a runner sees, kept as the session would keep it; see the module."""

    def __init__(
        self,
        runner: RunnerT,
        *,
        policies: Mapping[str, ToolPolicy] | None = None,
        default_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
        built_ins: Sequence[str] = (),
        flow_id: str = "s-1",
    ) -> None:
        if not flow_id or "/" in flow_id:
            raise ValueError(f"flow_id must be a non-empty name without '/', got {flow_id!r}")
        self.runner = runner
        self.policies: dict[str, ToolPolicy] = dict(policies or {})
        self.default_effect = ToolEffect(default_effect)
        self.built_ins = tuple(built_ins)
        self.flow_id = flow_id
        self.events = RecordingEventWriter()
        self.messages: list[AgentMessage] = []
        self.records: list[AgentToolCall] = []
        self.run_state: str | None = None
        self.turn = 0
        self.session_settings: dict[str, Any] = {}
        """The settings the next contexts carry (``AgentTurnContext.session_settings``)."""
        self.interaction_mode = InteractionMode.CHAT
        self.plan: AgentPlan | None = None

    @property
    def turn_id(self) -> str:
        return f"turn-{self.turn}"

    # --- what the session stores ---------------------------------------------------

    def store(self, messages: Sequence[FrameworkMessage]) -> None:
        """Store ``messages`` in the current turn, numbered as the session numbers them."""
        for message in messages:
            self.messages.append(
                AgentMessage.from_framework_message(
                    message, sequence=len(self.messages) + 1, turn_id=self.turn_id
                )
            )

    def start_turn(self, text: str) -> None:
        """A new turn: its user message stored, no run state and no records yet."""
        self.turn += 1
        self.records = []
        self.run_state = None
        self.store([self.runner.build_user_message(text)])

    async def run_text_turns(self, *texts: str) -> None:
        """One turn per text whose model step answers at once (no tool calls)."""
        for text in texts:
            self.start_turn(text)
            outcome = await self.run_model()
            if not isinstance(outcome, TurnCompleted):
                raise AssertionError(f"the turn of {text!r} asked for tools")

    def items(self) -> list[Any]:
        """Every stored ``framework_item``, parsed as JSON."""
        return [json.loads(message.framework_item) for message in self.messages]

    # --- the model step ------------------------------------------------------------

    def context(self, attempt: int = 1) -> AgentTurnContext:
        """The turn context of a RunModel attempt, built from the committed state only."""
        self.events.turn_id = self.turn_id
        self.events.attempt = attempt
        return AgentTurnContext(
            flow_id=self.flow_id,
            turn_id=self.turn_id,
            attempt=attempt,
            messages=tuple(self.messages),
            framework_run_state=self.run_state,
            tool_calls=tuple(self.records),
            events=self.events,
            cancellation=_NotCancelled(),
            deadline=_FAR_DEADLINE,
            step_execution_id=f"RunModel-{self.turn}",
            tool_policies=self.policies,
            default_tool_effect=self.default_effect,
            heartbeat=_no_heartbeat,
            enabled_built_in_tools=self.built_ins,
            session_settings=dict(self.session_settings),
            interaction_mode=self.interaction_mode,
            plan=self.plan,
        )

    async def run_model(self, attempt: int = 1) -> TurnCompleted | ToolCallsRequested:
        """Run one model step and commit its outcome (messages, run state, approved records)."""
        outcome = await self.runner.run_model_step(self.context(attempt))
        self.store(outcome.new_messages)
        if isinstance(outcome, ToolCallsRequested):
            self.run_state = outcome.framework_run_state
            for call in outcome.tool_calls:
                self.records.append(
                    AgentToolCall(
                        tool_call_id=call.tool_call_id,
                        turn_id=self.turn_id,
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

    # --- tool calls ----------------------------------------------------------------

    def record(self, tool_call_id: str) -> AgentToolCall:
        """The current turn's record of ``tool_call_id``."""
        for record in self.records:
            if record.tool_call_id == tool_call_id:
                return record
        raise KeyError(f"no record of tool call {tool_call_id!r} in {self.turn_id}")

    def finish(self, tool_call_id: str, status: AgentToolCallStatus, **fields: Any) -> None:
        """Give ``tool_call_id``'s record ``status`` and ``fields`` (``output=``, ``error=``)."""
        self.record(tool_call_id)
        self.records = [
            replace(r, status=status, **fields) if r.tool_call_id == tool_call_id else r
            for r in self.records
        ]

    def reject(self, tool_call_id: str, message: str | None = None) -> None:
        """Record a rejection of ``tool_call_id`` with ``message``, as a person would."""
        self.finish(tool_call_id, AgentToolCallStatus.REJECTED, rejection_message=message)

    def execution(
        self, record: AgentToolCall, attempt: int = 1, *, input_answers: Sequence[str] = ()
    ) -> DeferredToolExecution:
        """The ``DeferredToolExecution`` of a tool Step attempt for ``record``; with
        ``input_answers``, the rerun after the tool's questions were answered (give
        ``record`` the ``input_continuation`` its last question returned)."""
        return DeferredToolExecution(
            flow_id=self.flow_id,
            tool_call=record,
            idempotency_key=f"{self.flow_id}/{record.turn_id}/{record.tool_call_id}",
            attempt=attempt,
            events=self.events,
            cancellation=_NotCancelled(),
            deadline=_FAR_DEADLINE,
            heartbeat=_no_heartbeat,
            heartbeat_checkpoint=None,
            save_heartbeat_checkpoint=_no_checkpoint,
            input_answers=tuple(input_answers),
        )

    async def run_tools(
        self, decide: Callable[[AgentToolCall], AgentToolCall | None] = lambda record: None
    ) -> None:
        """Run every call that is not final, in deferral order, recording its outcome.

        ``decide(record)`` may return the call's final record instead (such as a
        rejection), and the call does not run. A ``ToolExecutionError`` records
        ``failed`` with its message; any other error propagates.
        """
        for record in list(self.records):
            decided = decide(record)
            if decided is not None:
                self.records = [decided if r is record else r for r in self.records]
                continue
            if record.is_final:
                continue
            try:
                result = await self.runner.execute_deferred_tool_call(self.execution(record))
            except ToolExecutionError as error:
                self.finish(record.tool_call_id, AgentToolCallStatus.FAILED, error=error.message)
                continue
            if not isinstance(result, ToolExecutionResult):
                raise AssertionError(
                    f"tool call {record.tool_call_id} asked for input ({type(result).__name__});"
                    " call execute_deferred_tool_call(driver.execution(record)) directly"
                )
            self.finish(record.tool_call_id, AgentToolCallStatus.SUCCEEDED, output=result.output)
