"""Pure rules of a turn: start it, apply a model step's outcome, complete it, fail it.

Nothing here touches Dex; each function takes committed values and returns the
``SessionChanges`` plus where the session goes next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from dex_agents._builtin_tools import BUILT_IN_TOOL_POLICY, WRITE_TODOS
from dex_agents._contract import (
    DeferredToolCall,
    ResolvedToolPolicy,
    RunnerDefectError,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentPlan,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    FrameworkMessage,
    InteractionMode,
    InterruptKind,
    TurnReplySequence,
    add_agent_usage,
    format_timestamp,
    to_wire,
)
from dex_agents.session._builtin_rules import route_built_in_call
from dex_agents.session._changes import SessionChanges
from dex_agents.session._interrupts import interrupt_raised_payload
from dex_agents.session._options import DEFAULT_MAX_DURABLE_WAIT
from dex_agents.session._plan_rules import SettledCall, settle_model_call
from dex_agents.session._question_supersession import raises_question, supersede_call
from dex_agents.session._routing import ToolStepKind, ToolStepMove, TurnRouting, tool_step_kind

__all__ = [
    "apply_model_outcome",
    "complete_turn",
    "fail_turn",
    "request_tool_calls",
    "start_turn",
    "turn_message_count",
]


def start_turn(
    state: AgentState,
    user_message: FrameworkMessage,
    interaction_mode: InteractionMode = InteractionMode.CHAT,
) -> tuple[SessionChanges, str]:
    """Start ``turn-<n>`` with ``user_message`` stored as its first message.

    Returns the changes and the new turn ID; events go to that turn. This Worker
    can steer and cancel the turn, so it sets ``accepts_turn_control``.
    """
    if not isinstance(user_message, FrameworkMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError(
            "runner defect: build_user_message must return a FrameworkMessage, "
            f"got {type(user_message).__name__}"
        )
    if user_message.role != "user":
        raise RunnerDefectError(
            "runner defect: build_user_message must return a message with role 'user', "
            f"got {user_message.role!r}"
        )
    turn_id = f"turn-{state.turn_count + 1}"
    sequence = state.message_count + 1
    changes = SessionChanges()
    changes.appended_messages.append(
        AgentMessage.from_framework_message(user_message, sequence=sequence, turn_id=turn_id)
    )
    changes.state = replace(
        state,
        status=AgentStatus.RUNNING_MODEL,
        turn_count=state.turn_count + 1,
        active_turn_id=turn_id,
        message_count=sequence,
        last_turn_error=None,
        interaction_mode=interaction_mode,
        accepts_turn_control=True,
    )
    changes.reply_sequence = TurnReplySequence(turn_id=turn_id, sequence=sequence + 1)
    changes.event("turn_started", sequence=sequence)
    return changes, turn_id


def turn_message_count(
    state: AgentState,
    turn_id: str,
    reply_sequence: TurnReplySequence | None,
    stored_messages: Sequence[AgentMessage],
) -> int:
    """Messages the turn stored after its user message, by ``state.message_count``."""
    if reply_sequence is not None and reply_sequence.turn_id == turn_id:
        return max(0, state.message_count - reply_sequence.sequence + 1)
    # Without a reply sequence of this turn, count its stored messages after the first.
    turn_messages = [message for message in stored_messages if message.turn_id == turn_id]
    return max(0, len(turn_messages) - 1)


def _append(
    changes: SessionChanges, state: AgentState, turn_id: str, messages: Sequence[FrameworkMessage]
) -> AgentState:
    sequence = state.message_count
    for message in messages:
        sequence += 1
        changes.appended_messages.append(
            AgentMessage.from_framework_message(message, sequence=sequence, turn_id=turn_id)
        )
    return replace(state, message_count=sequence)


def _record_usage(changes: SessionChanges, session_usage: AgentUsage, recorded: AgentUsage) -> None:
    total = add_agent_usage(session_usage, recorded)
    changes.usage = total
    changes.event("usage_recorded", recorded=to_wire(recorded), session=to_wire(total))


def _check_messages(messages: object, where: str) -> tuple[FrameworkMessage, ...]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise RunnerDefectError(f"runner defect: {where} must be a sequence of FrameworkMessage")
    items: list[FrameworkMessage] = []
    for index, message in enumerate(messages):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if not isinstance(message, FrameworkMessage):
            raise RunnerDefectError(
                f"runner defect: {where}[{index}] must be a FrameworkMessage, "
                f"got {type(message).__name__}"  # pyright: ignore[reportUnknownArgumentType]
            )
        items.append(message)
    return tuple(items)


def _check_usage(usage: object) -> AgentUsage:
    if not isinstance(usage, AgentUsage):
        raise RunnerDefectError(
            f"runner defect: usage must be an AgentUsage, got {type(usage).__name__}"
        )
    return usage


def complete_turn(
    state: AgentState,
    outcome: TurnCompleted,
    *,
    session_usage: AgentUsage,
    records: Sequence[AgentToolCall],
    reply_sequence: TurnReplySequence | None,
    stored_messages: Sequence[AgentMessage],
) -> tuple[SessionChanges, TurnRouting]:
    """Store the final answer and end the turn."""
    turn_id = _active_turn(state)
    messages = _check_messages(outcome.new_messages, "TurnCompleted.new_messages")
    usage = _check_usage(outcome.usage)
    changes = SessionChanges()
    _record_usage(changes, session_usage, usage)
    appended = _append(changes, state, turn_id, messages)
    changes.state = replace(
        appended, status=AgentStatus.WAITING_FOR_USER_MESSAGE, active_turn_id=None
    )
    changes.set_framework_run_state(None)
    changes.deleted_record_ids.extend(record.tool_call_id for record in records)
    changes.event(
        "turn_completed",
        message_count=turn_message_count(appended, turn_id, reply_sequence, stored_messages),
    )
    return changes, TurnRouting.await_user_message()


def _check_tool_calls(
    outcome: ToolCallsRequested, records: Sequence[AgentToolCall]
) -> tuple[DeferredToolCall, ...]:
    state = outcome.framework_run_state
    if not isinstance(state, str) or not state:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError(
            "runner defect: ToolCallsRequested.framework_run_state must be non-empty text"
        )
    calls = outcome.tool_calls
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerDefectError("runner defect: ToolCallsRequested.tool_calls must be a sequence")
    if len(calls) == 0:
        raise RunnerDefectError(
            "runner defect: ToolCallsRequested.tool_calls is empty; "
            "return TurnCompleted when the model asks for no tool"
        )
    recorded = {record.tool_call_id for record in records}
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if not isinstance(call, DeferredToolCall):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(
                f"runner defect: tool_calls[{index}] must be a DeferredToolCall, "
                f"got {type(call).__name__}"
            )
        call_id = call.tool_call_id
        if not isinstance(call_id, str) or not call_id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(
                f"runner defect: tool call {index} ({call.tool_name!r}) has an empty tool call ID"
            )
        if "/" in call_id:
            raise RunnerDefectError(
                f"runner defect: tool call ID {call_id!r} contains '/'; "
                "tool call IDs must not contain '/'"
            )
        if call_id in seen:
            raise RunnerDefectError(
                f"runner defect: tool call ID {call_id!r} appears twice in one turn; "
                "tool call IDs must be unique within a turn"
            )
        if call_id in recorded:
            raise RunnerDefectError(
                f"runner defect: tool call {call_id!r} already has a record in this turn; "
                "request each tool call once"
            )
        seen.add(call_id)
        if not isinstance(call.tool_name, str) or not call.tool_name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(f"runner defect: tool call {call_id!r} has an empty tool name")
        if not isinstance(call.arguments, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(
                f"runner defect: arguments of tool call {call_id!r} must be JSON text"
            )
        if not isinstance(call.policy, ResolvedToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RunnerDefectError(
                f"runner defect: tool call {call_id!r} needs a ResolvedToolPolicy; "
                "use turn.resolve_tool_policy(tool_name)"
            )
    return tuple(calls)


def request_tool_calls(
    state: AgentState,
    outcome: ToolCallsRequested,
    *,
    session_usage: AgentUsage,
    records: Sequence[AgentToolCall],
    pending_interrupts: Sequence[AgentInterrupt],
    now: datetime,
    interrupt_deadline: timedelta | None,
    trace_context: str | None = None,
    built_in_tools: Sequence[str] = (),
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT,
    plan: AgentPlan | None = None,
    question_supersedes_later_calls: bool = False,
) -> tuple[SessionChanges, TurnRouting]:
    """Record the requested calls, raise approvals, and route each call to its Step.

    A call of an enabled built-in tool goes to the session's own handling with a
    fixed policy (``read``, no approval); invalid arguments make it final here.
    With ``question_supersedes_later_calls``, the calls after a question are final
    here too, not run.
    """
    turn_id = _active_turn(state)
    calls = _check_tool_calls(outcome, records)
    messages = _check_messages(outcome.new_messages, "ToolCallsRequested.new_messages")
    usage = _check_usage(outcome.usage)
    changes = SessionChanges()
    _record_usage(changes, session_usage, usage)
    appended = _append(changes, state, turn_id, messages)
    changes.state = replace(appended, status=AgentStatus.RUNNING_TOOLS)
    changes.set_framework_run_state(outcome.framework_run_state)
    deadline = format_timestamp(now + interrupt_deadline) if interrupt_deadline else None
    interrupts = list(pending_interrupts)
    moves: list[ToolStepMove] = []
    write_todos_calls = sum(1 for call in calls if call.tool_name == WRITE_TODOS)
    superseded = False
    for offset, call in enumerate(calls):
        built_in = call.tool_name in built_in_tools
        policy = BUILT_IN_TOOL_POLICY if built_in else call.policy
        record = AgentToolCall(
            tool_call_id=call.tool_call_id,
            turn_id=turn_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            effect=policy.effect,
            requires_approval=policy.requires_approval,
            status=(
                AgentToolCallStatus.AWAITING_APPROVAL
                if policy.requires_approval
                else AgentToolCallStatus.APPROVED
            ),
            deferral_order=len(records) + offset,
            tool_source_reference=call.tool_source_reference,
            trace_context=trace_context,
        )
        changes.written_records.append(record)
        changes.event(
            "tool_call_deferred",
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            effect=policy.effect.value,
            requires_approval=policy.requires_approval,
        )
        settled = (
            SettledCall(supersede_call(record))
            if superseded
            else settle_model_call(
                record,
                plan=plan,
                mode=state.interaction_mode,
                built_in_tools=built_in_tools,
                write_todos_calls=write_todos_calls,
            )
        )
        if settled is not None:
            # Final in this commit: write_todos, any other call of a planning turn, or a
            # call after a question that supersedes it.
            changes.written_records.pop()
            changes.merge(settled.changes)
            if settled.plan is not None:
                plan = changes.plan = settled.plan
        elif built_in:
            move = route_built_in_call(
                changes, record, interrupts, now=now, deadline=deadline, max_wait=max_durable_wait
            )
            if move is not None:
                moves.append(move)
            if question_supersedes_later_calls and raises_question(move):
                superseded = True
        elif policy.requires_approval:
            interrupt = AgentInterrupt(
                interrupt_id=call.tool_call_id,
                kind=InterruptKind.APPROVAL,
                turn_id=turn_id,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                deadline=deadline,
            )
            interrupts.append(interrupt)
            changes.event("interrupt_raised", **interrupt_raised_payload(interrupt))
            moves.append(ToolStepMove(call.tool_call_id, ToolStepKind.AWAIT_APPROVAL))
        else:
            moves.append(ToolStepMove(call.tool_call_id, tool_step_kind(policy.effect)))
    changes.pending_interrupts = tuple(interrupts)
    return changes, TurnRouting(tool_steps=tuple(moves), resume_count=len(calls))


def apply_model_outcome(
    state: AgentState,
    outcome: object,
    *,
    session_usage: AgentUsage,
    records: Sequence[AgentToolCall],
    pending_interrupts: Sequence[AgentInterrupt],
    reply_sequence: TurnReplySequence | None,
    stored_messages: Sequence[AgentMessage],
    now: datetime,
    interrupt_deadline: timedelta | None,
    trace_context: str | None = None,
    built_in_tools: Sequence[str] = (),
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT,
    plan: AgentPlan | None = None,
    question_supersedes_later_calls: bool = False,
) -> tuple[SessionChanges, TurnRouting]:
    """Apply what ``run_model_step`` returned; a wrong type is a runner defect."""
    if isinstance(outcome, TurnCompleted):
        return complete_turn(
            state,
            outcome,
            session_usage=session_usage,
            records=records,
            reply_sequence=reply_sequence,
            stored_messages=stored_messages,
        )
    if isinstance(outcome, ToolCallsRequested):
        return request_tool_calls(
            state,
            outcome,
            session_usage=session_usage,
            records=records,
            pending_interrupts=pending_interrupts,
            now=now,
            interrupt_deadline=interrupt_deadline,
            trace_context=trace_context,
            built_in_tools=built_in_tools,
            max_durable_wait=max_durable_wait,
            plan=plan,
            question_supersedes_later_calls=question_supersedes_later_calls,
        )
    raise RunnerDefectError(
        "runner defect: run_model_step must return TurnCompleted or ToolCallsRequested, "
        f"got {type(outcome).__name__}"
    )


def fail_turn(
    state: AgentState,
    *,
    error: str,
    records: Sequence[AgentToolCall],
    pending_interrupts: Sequence[AgentInterrupt],
    unfinished_messages: Sequence[FrameworkMessage],
    failure_note: FrameworkMessage | None,
) -> tuple[SessionChanges, TurnRouting]:
    """End the active turn as failed: store what its tools did, then clear it."""
    changes = SessionChanges()
    turn_id = state.active_turn_id
    if turn_id is None:
        # Nothing to fail (a retried failure route after its commit); just wait for a message.
        return changes, TurnRouting.await_user_message()
    messages = list(unfinished_messages)
    if failure_note is not None:
        messages.append(failure_note)
    appended = _append(changes, state, turn_id, messages)
    changes.state = replace(
        appended,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        last_turn_error=error,
    )
    changes.set_framework_run_state(None)
    changes.deleted_record_ids.extend(record.tool_call_id for record in records)
    remaining = tuple(interrupt for interrupt in pending_interrupts if interrupt.turn_id != turn_id)
    if len(remaining) != len(pending_interrupts):
        changes.pending_interrupts = remaining
    changes.event("turn_failed", error=error)
    return changes, TurnRouting.await_user_message()


def _active_turn(state: AgentState) -> str:
    if state.active_turn_id is None:
        raise RuntimeError("no active turn: RunModel ran while the session waits for a message")
    return state.active_turn_id
