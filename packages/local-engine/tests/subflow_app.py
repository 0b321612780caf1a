"""Parent and child Flows for the SubFlow tests."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from dex import (
    Context,
    Flow,
    FlowTimeoutPolicy,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Timer,
    Wait,
    force_fail,
    graceful_complete,
)

CHILD_MAY_FINISH = threading.Event()  # the Worker runs on a thread of the test process


class Double(Step[int]):
    """Doubles its input; a negative input fails the Flow."""

    def execute(self, context: Context, input: int) -> StepDecision:
        if input < 0:
            return force_fail(f"negative input {input}")
        return graceful_complete(input * 2)


class Child(Flow[int]):
    """Completes with twice its input, or fails for a negative one."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Double())


class Parked(Step[int]):
    """Waits for an hour-long Timer (tests skip it or stop the Flow)."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1), condition_id="park"))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class SlowChild(Flow[int]):
    """Completes with its input once its Timer is skipped."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Parked())


def _describe(context: Context, index: int) -> str:
    result = SubFlow.get_condition_results(context, index)
    output = str(result.single_output(int)) if result.completions else "-"
    return f"{SubFlow.get_flow_id(context, index)}|{result.status.name}|{output}"


class RunOne(Step[int]):
    """Starts one child (reuse policy by input sign) and reports its result."""

    def __init__(self, child: Flow[int], policy: SubFlowReusePolicy | None = None) -> None:
        self.child = child
        self.policy = policy

    def wait_for(self, context: Context, input: int) -> Wait:
        options = SubFlowOptions(
            timeout=timedelta(hours=1),
            timeout_policy=FlowTimeoutPolicy.CANCEL,
            reuse_policy=self.policy or SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY,
        )
        return Wait.until(SubFlow.run(self.child, input, options))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(_describe(context, 0))


class OneParent(Flow[int]):
    """Waits for one Child."""

    def __init__(self, child: Flow[int]) -> None:
        self.start = RunOne(child)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


class AttachParent(Flow[int]):
    """Waits for one SlowChild with the ATTACH policy."""

    def __init__(self, child: Flow[int]) -> None:
        self.start = RunOne(child, SubFlowReusePolicy.ATTACH)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


class RestartParent(Flow[int]):
    """Waits for one SlowChild with the ALWAYS_RESTART policy."""

    def __init__(self, child: Flow[int]) -> None:
        self.start = RunOne(child, SubFlowReusePolicy.ALWAYS_RESTART)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


class RunBoth(Step[int]):
    """All of two children, or (for a negative input) any of a zero Timer and a slow one."""

    def __init__(self, child: Flow[int], slow: Flow[int]) -> None:
        self.child = child
        self.slow = slow

    def wait_for(self, context: Context, input: int) -> Wait:
        if input < 0:
            return Wait.any_of(Timer.by_duration(timedelta(0)), SubFlow.run(self.slow, input))
        return Wait.all_of(SubFlow.run(self.child, input), SubFlow.run(self.child, input + 1))

    def execute(self, context: Context, input: int) -> StepDecision:
        count = 1 if input < 0 else 2
        return graceful_complete(";".join(_describe(context, i) for i in range(count)))


class BothParent(Flow[int]):
    """Waits for two children at once."""

    def __init__(self, child: Flow[int], slow: Flow[int]) -> None:
        self.start = RunBoth(child, slow)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


def flows() -> list[Flow[Any]]:
    """Every Flow here, children first."""
    child, slow = Child(), SlowChild()
    return [
        child,
        slow,
        OneParent(child),
        AttachParent(slow),
        RestartParent(slow),
        BothParent(child, slow),
    ]
