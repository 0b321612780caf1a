"""Pure close rules: what an execute decision does to its Flow, and when a run ends.

The engine asks :func:`plan_close` what a Step decision means and applies the answer;
:func:`graceful_completion_due` says when a Flow that asked for graceful completion
may complete, and :func:`continue_as_new_due` when a run continues as new.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from dex.dexpb import dex_pb2 as pb


class FlowEffect(Enum):
    """What a Step decision does to its Flow."""

    NONE = "none"  # the Flow goes on (next Steps, dead end, channels not empty)
    GRACEFUL = "graceful"  # complete once no other Step is active
    COMPLETE = "complete"  # complete now
    FAIL = "fail"  # fail now


@dataclass(frozen=True)
class ClosePlan:
    """The planned outcome of a Step decision: effect, output, reason, next Steps."""

    effect: FlowEffect
    start_next_steps: bool
    output: pb.Value | None  # a completion output to collect, if any
    reason: str = ""  # the failure reason for FAIL


def _output(close: pb.CloseDecision) -> pb.Value | None:
    if not close.HasField("close_input"):
        return None
    if close.close_input.WhichOneof("kind") in (None, "null_value"):
        return None  # null outputs are not returned with the Flow result
    return close.close_input


def plan_close(decision: pb.StepDecision, channel_drained: Callable[[str], bool]) -> ClosePlan:
    """What ``decision`` does to the Flow.

    ``channel_drained(name)`` tells whether a Channel has no messages, counting those
    held by running Steps; it is asked only for ForceCompleteIfChannelsEmpty.
    """
    if not decision.HasField("close_decision"):
        return ClosePlan(FlowEffect.NONE, start_next_steps=True, output=None)
    close = decision.close_decision
    kind = close.close_decision_type
    if kind == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
        reason = close.close_input.string_value if close.HasField("close_input") else ""
        return ClosePlan(FlowEffect.FAIL, start_next_steps=False, output=None, reason=reason)
    if kind == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
        return ClosePlan(FlowEffect.COMPLETE, start_next_steps=False, output=_output(close))
    if kind == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
        return ClosePlan(FlowEffect.GRACEFUL, start_next_steps=True, output=_output(close))
    if kind == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY:
        if all(channel_drained(name) for name in close.conditional_channel_names):
            return ClosePlan(FlowEffect.COMPLETE, start_next_steps=False, output=_output(close))
        return ClosePlan(FlowEffect.NONE, start_next_steps=True, output=None)
    # DEAD_END (and an unset type) ends only this branch: the Flow keeps running even
    # when no Step is left.
    return ClosePlan(FlowEffect.NONE, start_next_steps=True, output=None)


def graceful_completion_due(
    graceful_requested: bool, active_steps: Iterable[tuple[str, bool]], timeout_handler_type: str
) -> bool:
    """Whether a Flow completes now: graceful completion was asked for and no Step is active.

    ``active_steps`` holds ``(step_type, is_waiting)`` for each active Step execution; a
    Flow timeout handler that is still waiting for its Timer does not hold the Flow open.
    """
    if not graceful_requested:
        return False
    return all(
        step_type == timeout_handler_type and is_waiting for step_type, is_waiting in active_steps
    )


def continue_as_new_due(threshold: int, *, events_after_start: int) -> bool:
    """Whether a running run continues as new: it recorded ``threshold`` history events
    after its start (``FlowConfig.continue_as_new_threshold``; 0 never continues)."""
    return threshold > 0 and events_after_start >= threshold
