"""Every text the session shows a model or a user, in one place.

A model reads these as tool results or as the turn failure note, so a change here
changes what models see in every session; keep them equal to the TypeScript core's.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex_agents._values import AgentToolCall, AgentToolCallStatus

__all__ = [
    "APPROVAL_DEADLINE_PASSED",
    "CONTEXT_SUMMARY_INSTRUCTIONS",
    "CONTEXT_SUMMARY_NOTE_HEADER",
    "DEFAULT_REJECTION_MESSAGE",
    "MISSING_TOOL_TASK_POLLER",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "PLANNING_TURN_TOOL_REJECTED",
    "QUESTION_DEADLINE_PASSED",
    "QUESTION_DECLINED",
    "TOOL_CALL_CANCELLED_BY_STEERING_RESULT",
    "TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT",
    "TURN_CANCELLED_NOTE_HEADER",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "TURN_STEERED_NOTE_HEADER",
    "WRITE_TODOS_CALLED_TWICE",
    "build_context_summary_omission_note",
    "build_turn_control_note",
    "build_turn_failure_note",
    "describe_tool_call_outcome",
    "invalid_built_in_arguments_error",
    "invalid_todos_error",
    "model_call_limit_result",
    "plan_execution_user_text",
    "question_id_in_use_error",
    "unknown_tool_error",
]

OUTCOME_UNKNOWN_TOOL_RESULT = (
    "The tool call's outcome is unknown: it was interrupted and may or may not have "
    "taken effect. Check whether it took effect before you call it again."
)
"""Result of an ``outcome_unknown`` call, the text the model sees."""

DEFAULT_REJECTION_MESSAGE = "The user rejected this tool call."
"""Result of a call whose approval was rejected without a message."""

APPROVAL_DEADLINE_PASSED = "approval deadline passed"
"""Rejection message of an approval that was not answered before its deadline."""

QUESTION_DEADLINE_PASSED = "question deadline passed"
"""Result of a question that was not answered before its deadline."""

QUESTION_DECLINED = "The user declined to answer."
"""Result of a question declined without a message."""

TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"
"""Start of the error of a call whose tool Step never reached a Worker."""

MISSING_TOOL_TASK_POLLER = (
    "the tool started a task, but this runner cannot poll tool tasks "
    "(it has no poll_tool_task), so the task's outcome is unknown"
)
"""Error of a call whose tool returned ``ToolTaskStarted`` to a runner without a poller."""

TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"
"""First line of the note a failed turn leaves for the next one (``build_turn_failure_note``)."""
TURN_FAILURE_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."


def describe_tool_call_outcome(record: AgentToolCall) -> str:
    """The result text a model sees for a final tool call record.

    ``succeeded`` gives the output, ``failed`` the error, ``rejected`` the
    rejection message, and ``outcome_unknown`` ``OUTCOME_UNKNOWN_TOOL_RESULT``.
    """
    status = record.status
    if status is AgentToolCallStatus.SUCCEEDED:
        return record.output if record.output is not None else ""
    if status is AgentToolCallStatus.FAILED:
        return record.error if record.error is not None else "The tool call failed."
    if status is AgentToolCallStatus.REJECTED:
        return (
            record.rejection_message
            if record.rejection_message is not None
            else DEFAULT_REJECTION_MESSAGE
        )
    if status is AgentToolCallStatus.OUTCOME_UNKNOWN:
        return OUTCOME_UNKNOWN_TOOL_RESULT
    raise ValueError(f"tool call {record.tool_call_id} is not final (status {status.value})")


def build_turn_failure_note(records: Iterable[AgentToolCall]) -> str | None:
    """The note a failed turn stores after its final tool calls, or ``None`` when none are final.

    One line per final call: ``- <tool> <arguments> -> <status>: <result>``.
    """
    return _tool_call_note(TURN_FAILURE_NOTE_HEADER, records)


def _tool_call_note(header: str, records: Iterable[AgentToolCall]) -> str | None:
    lines = [
        f"- {record.tool_name} {record.arguments} -> {record.status.value}: "
        f"{describe_tool_call_outcome(record)}"
        for record in records
        if record.is_final
    ]
    if not lines:
        return None
    return "\n".join([header, *lines, TURN_FAILURE_NOTE_FOOTER])


TOOL_CALL_CANCELLED_BY_STEERING_RESULT = (
    "The tool call was not run: the user sent a new message that redirected this turn."
)
"""Result of a call that had not started when the user steered the turn."""

TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT = (
    "The tool call was not run: the user stopped this turn."
)
"""Result of a call that had not started when the user cancelled the turn."""

TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT = (
    "The tool call was not run: it came after a question to the user in the same response."
)
"""Result of a call after an ``ask_user`` question, with ``question_supersedes_later_calls``."""

TURN_STEERED_NOTE_HEADER = "[Dex] The user redirected the previous turn after these tool calls ran:"
TURN_CANCELLED_NOTE_HEADER = "[Dex] The user stopped the previous turn after these tool calls ran:"


def build_turn_control_note(*, cancelled: bool, records: Iterable[AgentToolCall]) -> str | None:
    """The note a steered or cancelled turn stores when its runner cannot store the transcript.

    It lists the turn's final calls like the turn failure note, under
    ``TURN_CANCELLED_NOTE_HEADER`` or ``TURN_STEERED_NOTE_HEADER``; ``None`` when none ran.
    """
    header = TURN_CANCELLED_NOTE_HEADER if cancelled else TURN_STEERED_NOTE_HEADER
    return _tool_call_note(header, records)


PLANNING_TURN_TOOL_REJECTED = (
    "The tool call was not run: a planning turn can only call write_todos."
)
"""Result of any call but ``write_todos`` in a planning turn."""

WRITE_TODOS_CALLED_TWICE = "write_todos was called more than once in one response"
"""Error of every ``write_todos`` call of a response that has more than one."""


def invalid_todos_error(reason: str) -> str:
    """The error of a ``write_todos`` call whose todos are invalid."""
    return f"invalid todos: {reason}"


def plan_execution_user_text(revision: int) -> str:
    """The user message of the turn that executes an approved plan revision."""
    return (
        f"[Dex] The user approved plan revision {revision}. Execute it and keep the task "
        "statuses current with write_todos."
    )


def question_id_in_use_error(interrupt_id: str) -> str:
    """The error of a tool whose question ID is another tool call's ID in the same turn."""
    return (
        f"the tool's question cannot use interrupt ID {interrupt_id}, "
        "which another tool call of this turn uses"
    )


def invalid_built_in_arguments_error(tool_name: str, reason: str) -> str:
    """The error of a built-in tool call whose arguments are invalid."""
    return f"invalid {tool_name} arguments: {reason}"


def model_call_limit_result(limit: int) -> str:
    """Stepwise: the result of each tool call asked for after the turn's model call limit."""
    return f"The tool call was not run: this turn reached its limit of {limit} model calls."


def unknown_tool_error(tool_name: str) -> str:
    """Stepwise: the error of a call whose name is no offered tool."""
    return f"unknown tool {tool_name}"


CONTEXT_SUMMARY_NOTE_HEADER = "[Dex] Summary of the earlier conversation:"
"""First line of the note that carries the context summary at the start of model input."""

CONTEXT_SUMMARY_INSTRUCTIONS = (
    "You summarize a conversation between a user and an AI assistant so that the "
    "assistant can continue it without the earlier messages. Keep every fact, decision, "
    "open question and commitment, the user's goals and preferences, names, numbers and "
    "identifiers, and which tool calls ran with what outcome, so that no write is "
    "repeated. When an earlier summary is given, fold it into the new one. Answer with "
    "the summary only."
)
"""Stepwise: the instructions of a ``summarize_context`` model call."""


def build_context_summary_omission_note(omitted_count: int) -> str:
    """Stepwise: the note that starts a summary request whose oldest messages were left out."""
    noun = "message was" if omitted_count == 1 else "messages were"
    return (
        f"[Dex] {omitted_count} older {noun} left out of this summary request "
        "because they did not fit in the model's context window."
    )
