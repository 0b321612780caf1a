"""Pure rules of the built-in tools the session handles: ``ask_user`` and ``durable_wait``.

``RunModel`` routes a built-in call here (``route_built_in_call``) and checks its
arguments in its own commit; an invalid call
records ``failed`` with ``invalid <tool> arguments: <reason>``. A ``null`` optional
argument counts as absent, and blank means empty after Python's ``str.strip()``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from dex_agents._builtin_tools import ASK_USER, DURABLE_WAIT
from dex_agents._texts import invalid_built_in_arguments_error
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentToolCall,
    AgentToolCallStatus,
    AnswerQuestionInput,
    InterruptKind,
    format_timestamp,
)
from dex_agents.session._changes import SessionChanges
from dex_agents.session._interrupts import (
    InterruptDecision,
    find_interrupt,
    interrupt_raised_payload,
    is_past_deadline,
    without_interrupt,
)
from dex_agents.session._routing import ToolStepKind, ToolStepMove
from dex_agents.session._tool_rules import finish_tool_call

__all__ = [
    "AskUserArguments",
    "DurableWaitArguments",
    "InvalidBuiltInArguments",
    "answer_matches_question",
    "ask_user_answer_output",
    "decide_answer_question",
    "durable_wait_output",
    "is_ask_user_call",
    "is_durable_wait_call",
    "parse_ask_user",
    "parse_durable_wait",
    "question_interrupt_id",
    "route_built_in_call",
    "tool_question_interrupt_id",
]


class InvalidBuiltInArguments(ValueError):
    """The model's arguments for a built-in tool are invalid; the message is the reason."""


@dataclass(frozen=True)
class AskUserArguments:
    question: str
    choices: tuple[str, ...] | None
    allows_free_text: bool


@dataclass(frozen=True)
class DurableWaitArguments:
    duration_seconds: int
    reason: str


def _object(arguments: str, allowed: Sequence[str]) -> dict[str, Any]:
    try:
        data = json.loads(arguments)
    except (TypeError, ValueError):
        raise InvalidBuiltInArguments("the arguments are not valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidBuiltInArguments("the arguments must be a JSON object")
    values = cast("dict[str, Any]", data)
    for name in values:
        if name not in allowed:
            raise InvalidBuiltInArguments(f"unexpected argument {name!r}")
    # A null optional argument counts as absent.
    return {name: value for name, value in values.items() if value is not None}


def parse_ask_user(arguments: str) -> AskUserArguments:
    """``{ question, choices?, allows_free_text? }``; free text is allowed unless set to false."""
    data = _object(arguments, ("question", "choices", "allows_free_text"))
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InvalidBuiltInArguments("question must be a non-blank string")
    choices: tuple[str, ...] | None = None
    if "choices" in data:
        raw = data["choices"]
        if not isinstance(raw, list):
            raise InvalidBuiltInArguments("choices must be a list of strings")
        items = cast("list[Any]", raw)
        if not all(isinstance(item, str) and item.strip() for item in items):
            raise InvalidBuiltInArguments("each choice must be a non-blank string")
        texts = tuple(cast("list[str]", items))
        if len(set(texts)) != len(texts):
            raise InvalidBuiltInArguments("choices must not repeat")
        choices = texts or None
    allows_free_text = data.get("allows_free_text", True)
    if not isinstance(allows_free_text, bool):
        raise InvalidBuiltInArguments("allows_free_text must be a boolean")
    if not allows_free_text and choices is None:
        raise InvalidBuiltInArguments("allows_free_text can be false only with choices")
    return AskUserArguments(question, choices, allows_free_text)


def parse_durable_wait(arguments: str, max_durable_wait: timedelta) -> DurableWaitArguments:
    """``{ duration_seconds, reason }`` with a whole duration from 1 to ``max_durable_wait``."""
    data = _object(arguments, ("duration_seconds", "reason"))
    duration = data.get("duration_seconds")
    if isinstance(duration, float) and duration.is_integer():
        duration = int(duration)
    if not isinstance(duration, int) or isinstance(duration, bool):
        raise InvalidBuiltInArguments("duration_seconds must be a whole number of seconds")
    longest = int(max_durable_wait.total_seconds())
    if duration < 1 or duration > longest:
        raise InvalidBuiltInArguments(f"duration_seconds must be from 1 to {longest}")
    reason = data.get("reason")
    if not isinstance(reason, str):
        raise InvalidBuiltInArguments("reason must be a string")
    return DurableWaitArguments(duration, reason)


def ask_user_answer_output(answer: str) -> str:
    """The result of an answered ``ask_user`` call."""
    return json.dumps(
        {"status": "answered", "answer": answer}, separators=(",", ":"), ensure_ascii=False
    )


def durable_wait_output(waited_seconds: int, reason: str) -> str:
    """The result of a finished ``durable_wait`` call."""
    return json.dumps(
        {"status": "completed", "waited_seconds": waited_seconds, "reason": reason},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def tool_question_interrupt_id(record: AgentToolCall) -> str:
    """``<tool_call_id>-input-<n>``: the interrupt of the tool's ``n``-th question."""
    return f"{record.tool_call_id}-input-{len(record.input_answers) + 1}"


def question_interrupt_id(record: AgentToolCall, *, is_ask_user: bool) -> str:
    """The interrupt that ``record`` waits on: its own ID for ``ask_user``, else the tool's."""
    return record.tool_call_id if is_ask_user else tool_question_interrupt_id(record)


def is_ask_user_call(record: AgentToolCall, built_in_tools: Sequence[str]) -> bool:
    return record.tool_name == ASK_USER and ASK_USER in built_in_tools


def is_durable_wait_call(tool_name: str, built_in_tools: Sequence[str]) -> bool:
    return tool_name == DURABLE_WAIT and DURABLE_WAIT in built_in_tools


def answer_matches_question(interrupt: AgentInterrupt, answer: str) -> bool:
    """A non-blank answer that is one of the choices unless free text is allowed."""
    if not answer.strip():
        return False
    if interrupt.choices is not None and interrupt.allows_free_text is False:
        return answer in interrupt.choices
    return True


def decide_answer_question(
    pending: Sequence[AgentInterrupt], request: AnswerQuestionInput, now: datetime
) -> InterruptDecision:
    """Accept an answer only for a pending question, before its deadline, that fits it."""
    interrupt = find_interrupt(pending, request.interrupt_id)
    if interrupt is None or interrupt.kind is not InterruptKind.QUESTION:
        return InterruptDecision(False)
    if is_past_deadline(interrupt, now) or not answer_matches_question(interrupt, request.answer):
        return InterruptDecision(False)
    remaining = without_interrupt(pending, request.interrupt_id)
    resolution = AgentInterruptResolution(
        interrupt_id=request.interrupt_id, approved=True, answer=request.answer
    )
    return InterruptDecision(True, remaining, resolution)


def route_built_in_call(
    changes: SessionChanges,
    record: AgentToolCall,
    interrupts: list[AgentInterrupt],
    *,
    now: datetime,
    deadline: str | None,
    max_wait: timedelta,
) -> ToolStepMove | None:
    """Route a built-in call: a question, a durable wait, or a failure for bad arguments."""
    try:
        if record.tool_name == ASK_USER:
            asked = parse_ask_user(record.arguments)
            waiting = replace(
                record,
                status=AgentToolCallStatus.AWAITING_ANSWER,
                input_question=asked.question,
                input_choices=asked.choices,
                input_allows_free_text=asked.allows_free_text,
            )
            interrupt = AgentInterrupt(
                interrupt_id=record.tool_call_id,
                kind=InterruptKind.QUESTION,
                turn_id=record.turn_id,
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                arguments=record.arguments,
                deadline=deadline,
                question=asked.question,
                choices=asked.choices,
                allows_free_text=asked.allows_free_text,
            )
            changes.written_records[-1] = waiting
            interrupts.append(interrupt)
            changes.event("interrupt_raised", **interrupt_raised_payload(interrupt))
            return ToolStepMove(record.tool_call_id, ToolStepKind.AWAIT_QUESTION)
        if record.tool_name == DURABLE_WAIT:
            wait = parse_durable_wait(record.arguments, max_wait)
            wait_until = format_timestamp(now + timedelta(seconds=wait.duration_seconds))
            changes.written_records[-1] = replace(
                record, status=AgentToolCallStatus.WAITING_FOR_TIMER, wait_until=wait_until
            )
            changes.event(
                "timer_started",
                tool_call_id=record.tool_call_id,
                wait_until=wait_until,
                reason=wait.reason,
            )
            return ToolStepMove(record.tool_call_id, ToolStepKind.AWAIT_TIMER)
        raise InvalidBuiltInArguments(f"{record.tool_name} is not a built-in tool")
    except InvalidBuiltInArguments as invalid:
        changes.written_records.pop()
        failed = finish_tool_call(
            record,
            AgentToolCallStatus.FAILED,
            error=invalid_built_in_arguments_error(record.tool_name, str(invalid)),
        )
        changes.written_records.extend(failed.written_records)
        changes.completed_tool_calls.extend(failed.completed_tool_calls)
        changes.events.extend(failed.events)
        return None
