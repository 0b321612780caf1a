"""Pure rule of ``question_supersedes_later_calls``: a question ends its response.

With the option on, ``RunModel`` makes every call after the first ``ask_user``
call that raised its question final in its own commit, without running it, so the
answer is the next thing the turn waits for. Calls before the question run as
usual; an ``ask_user`` call with invalid arguments or one a planning turn rejects
asks nothing and supersedes nothing.
"""

from __future__ import annotations

from typing import Final

from dex_agents._texts import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.session._changes import SessionChanges
from dex_agents.session._routing import ToolStepKind, ToolStepMove
from dex_agents.session._tool_rules import finish_tool_call

__all__ = ["SUPERSEDED_BY_USER_INPUT", "raises_question", "supersede_call"]

SUPERSEDED_BY_USER_INPUT: Final = "superseded_by_user_input"
"""The ``cancellation_reason`` of a call that came after a question in its response."""


def raises_question(move: ToolStepMove | None) -> bool:
    """Whether routing a built-in call raised a question (it waits in ``AwaitQuestionAnswer``)."""
    return move is not None and move.kind is ToolStepKind.AWAIT_QUESTION


def supersede_call(record: AgentToolCall) -> SessionChanges:
    """Record a call after the question as ``rejected``: it was never run."""
    return finish_tool_call(
        record,
        AgentToolCallStatus.REJECTED,
        rejection_message=TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT,
        cancellation_reason=SUPERSEDED_BY_USER_INPUT,
    )
