"""Unit tests of the pure close rules (decisions.py)."""

from __future__ import annotations

import pytest
from dex.dexpb import dex_pb2 as pb
from google.protobuf import struct_pb2

from dex_local_engine._rules.decisions import (
    FlowEffect,
    graceful_completion_due,
    plan_close,
)

HANDLER = "sys:timeout_handler"


def _decision(
    kind: int, *, output: pb.Value | None = None, channels: tuple[str, ...] = ()
) -> pb.StepDecision:
    close = pb.CloseDecision(close_decision_type=kind, conditional_channel_names=channels)  # type: ignore[arg-type]
    if output is not None:
        close.close_input.CopyFrom(output)
    return pb.StepDecision(close_decision=close, next_steps=[pb.StepMovement(step_type="Fallback")])


def _never(name: str) -> bool:
    raise AssertionError(f"channel {name} should not be checked")


def test_no_close_decision_starts_next_steps() -> None:
    plan = plan_close(pb.StepDecision(next_steps=[pb.StepMovement(step_type="A")]), _never)
    assert plan.effect is FlowEffect.NONE
    assert plan.start_next_steps
    assert plan.output is None


def test_dead_end_keeps_the_flow_running() -> None:
    plan = plan_close(_decision(pb.CLOSE_DECISION_TYPE_DEAD_END), _never)
    assert plan.effect is FlowEffect.NONE
    assert plan.output is None


def test_graceful_complete_collects_a_non_null_output() -> None:
    plan = plan_close(
        _decision(pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE, output=pb.Value(string_value="done")),
        _never,
    )
    assert plan.effect is FlowEffect.GRACEFUL
    assert plan.output == pb.Value(string_value="done")


@pytest.mark.parametrize(
    "kind", [pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE, pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE]
)
def test_null_or_missing_outputs_are_not_collected(kind: int) -> None:
    null = pb.Value(null_value=struct_pb2.NULL_VALUE)
    assert plan_close(_decision(kind, output=null), _never).output is None
    assert plan_close(_decision(kind), _never).output is None


def test_force_complete_closes_now_and_ignores_next_steps() -> None:
    plan = plan_close(
        _decision(pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE, output=pb.Value(int_value=3)), _never
    )
    assert plan.effect is FlowEffect.COMPLETE
    assert not plan.start_next_steps
    assert plan.output == pb.Value(int_value=3)


def test_force_fail_carries_the_reason() -> None:
    plan = plan_close(
        _decision(pb.CLOSE_DECISION_TYPE_FORCE_FAIL, output=pb.Value(string_value="gave up")),
        _never,
    )
    assert plan.effect is FlowEffect.FAIL
    assert plan.reason == "gave up"
    assert not plan.start_next_steps


def test_complete_if_channels_empty() -> None:
    decision = _decision(
        pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY,
        output=pb.Value(string_value="drained"),
        channels=("a", "b"),
    )
    empty = plan_close(decision, lambda name: True)
    assert empty.effect is FlowEffect.COMPLETE
    assert empty.output == pb.Value(string_value="drained")
    not_empty = plan_close(decision, lambda name: name == "a")
    assert not_empty.effect is FlowEffect.NONE
    assert not_empty.start_next_steps  # the fallback movement
    assert not_empty.output is None


def test_graceful_completion_waits_for_active_steps() -> None:
    assert not graceful_completion_due(False, [], HANDLER)
    assert graceful_completion_due(True, [], HANDLER)
    assert not graceful_completion_due(True, [("Other", True)], HANDLER)
    assert not graceful_completion_due(True, [("Other", False)], HANDLER)
    # A Flow timeout handler still waiting for its Timer does not hold the Flow open...
    assert graceful_completion_due(True, [(HANDLER, True)], HANDLER)
    # ...but one that runs does.
    assert not graceful_completion_due(True, [(HANDLER, False)], HANDLER)
