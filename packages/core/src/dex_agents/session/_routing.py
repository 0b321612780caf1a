"""Where the session goes after a transition: plain data the Step glue turns into Dex moves."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dex_agents._values import ToolEffect

__all__ = ["ToolStepKind", "ToolStepMove", "TurnRouting", "tool_step_kind"]


class ToolStepKind(Enum):
    """Which Step a deferred tool call goes to first."""

    AWAIT_APPROVAL = "AwaitToolApproval"
    AWAIT_QUESTION = "AwaitQuestionAnswer"
    AWAIT_TIMER = "AwaitTimer"
    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"
    POLL_TOOL_TASK = "PollToolTask"


@dataclass(frozen=True)
class ToolStepMove:
    """Start ``kind`` for ``tool_call_id``."""

    tool_call_id: str
    kind: ToolStepKind


@dataclass(frozen=True)
class TurnRouting:
    """Where the session goes after a transition.

    ``tool_steps`` with ``resume_count``: one Step per call plus ``ResumeTurn``.
    Otherwise ``run_model`` (``RunModel``) or neither (``AwaitUserMessage``).
    """

    run_model: bool = False
    tool_steps: tuple[ToolStepMove, ...] = ()
    resume_count: int = 0
    apply_turn_control: bool = False
    """End a steered or cancelled turn in ``ApplyTurnControl``."""

    @staticmethod
    def await_user_message() -> TurnRouting:
        return TurnRouting()


def tool_step_kind(effect: ToolEffect) -> ToolStepKind:
    """``CallTool`` for effects that may repeat, ``CallSingleAttemptTool`` for the rest."""
    if effect in (ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE):
        return ToolStepKind.CALL_TOOL
    return ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL
