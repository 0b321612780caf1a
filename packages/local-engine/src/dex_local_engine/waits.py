"""Waiting conditions: evaluation of Timers and Channels, wake-ups, SkipTimer."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors, flows, locks, steps, subflows
from dex_local_engine.conditions import WaitState, evaluate_wait
from dex_local_engine.model import Flow, Phase, StaleSkip, StepExec

if TYPE_CHECKING:
    from dex_local_engine.engine import Engine


def evaluate(engine: Engine, flow: Flow, step: StepExec) -> bool:
    """Check a waiting Step's condition; on a match take its messages and go on."""
    condition = step.condition
    if condition is None:
        step.results = pb.ConditionResults()
        step.phase = Phase.EXECUTE_LOCK
        engine.touch(flow, step)
        return True
    now = engine.now(flow)
    fired = set(step.skipped_timers)
    next_fire: float | None = None
    for index, timer in enumerate(condition.timer_conditions):
        fire_at = step.wait_started + max(0, timer.duration_seconds)
        if fire_at <= now:
            fired.add(index)
        elif index not in fired and (next_fire is None or fire_at < next_fire):
            next_fire = fire_at
    sizes = {
        c.channel_name: flow.channel_size(c.channel_name) for c in condition.channel_conditions
    }
    children = subflows.closed_children(engine, flow, step)
    outcome = evaluate_wait(condition, WaitState(frozenset(fired), sizes, children))
    if outcome is None:
        if next_fire is not None:
            arm_wake(engine, flow, step, next_fire)
        return False
    wake = engine.wakes.pop((flow.flow_id, step.sid), None)
    if wake is not None:
        wake.cancel()
    results = pb.ConditionResults(sub_flow_results=subflows.results(engine, flow, step))
    completed_timers = set(outcome.completed_timers)
    for index, timer in enumerate(condition.timer_conditions):
        status = (
            pb.CONDITION_STATUS_COMPLETED
            if index in completed_timers
            else pb.CONDITION_STATUS_WAITING
        )
        results.timer_results.add(condition_id=timer.condition_id, condition_status=status)
    takes = dict(outcome.channel_takes)
    consumed = flow.inflight.setdefault(step.sid, [])
    for index, channel_condition in enumerate(condition.channel_conditions):
        result = results.channel_results.add(
            condition_id=channel_condition.condition_id,
            channel_name=channel_condition.channel_name,
            condition_status=pb.CONDITION_STATUS_WAITING,
        )
        if index not in takes:
            continue
        result.condition_status = pb.CONDITION_STATUS_COMPLETED
        queue = flow.channels.get(channel_condition.channel_name)
        for _ in range(takes[index]):
            if not queue:
                break
            message = queue.popleft()
            consumed.append(message)
            result.values.append(message.value)
            engine.store.consume_message(flow.flow_id, message.seq, step.sid)
    if not consumed:
        flow.inflight.pop(step.sid, None)
    step.results = results
    step.phase = Phase.EXECUTE_LOCK
    engine.touch(flow, step)
    return True


def arm_wake(engine: Engine, flow: Flow, step: StepExec, at: float) -> None:
    """Advance the Step again at ``at`` (a Timer, a retry backoff or a start delay)."""
    key = (flow.flow_id, step.sid)
    old = engine.wakes.pop(key, None)
    if old is not None:
        old.cancel()
    loop = asyncio.get_running_loop()
    engine.wakes[key] = loop.call_later(
        max(0.0, at - time.time()), partial(_on_wake, engine), flow, step
    )


def _on_wake(engine: Engine, flow: Flow, step: StepExec) -> None:
    engine.wakes.pop((flow.flow_id, step.sid), None)
    if not flow.running or step.ended or flow.steps.get(step.sid) is not step:
        return
    with engine.tx():
        steps.advance(engine, flow, step)
        after_change(engine, flow)


def _wake_waiting(engine: Engine, flow: Flow) -> None:
    for step in steps.ordered_steps(flow):
        if step.phase is Phase.WAITING:
            steps.advance(engine, flow, step)


def after_change(engine: Engine, flow: Flow) -> None:
    """Serve lock waiters and waiting Steps after locks or Channels changed."""
    locks.wake_lock_waiters(engine, flow)
    _wake_waiting(engine, flow)
    flows.check_graceful(engine, flow)


def skip_timer(engine: Engine, request: pb.SkipTimerRequest) -> None:
    """SkipTimer: fire a Timer of a waiting Step, or remember it until the Step waits."""
    flow = engine.flow(request.flow_id, active=True)
    sid = request.step_execution_id
    step_type, _, number = sid.rpartition("-")
    if not step_type or not number.isdigit():
        raise errors.invalid(f"step_execution_id {sid!r} is not '<StepType>-<n>'")
    if not request.timer_condition_id and not request.HasField("timer_condition_index"):
        raise errors.invalid("SkipTimer needs a timer_condition_id or timer_condition_index")
    index = request.timer_condition_index if request.HasField("timer_condition_index") else None
    with engine.tx():
        step = flow.steps.get(sid)
        if step is None and sid in flow.ended_steps:
            return
        if step is None or step.phase is not Phase.WAITING or step.condition is None:
            flow.stale_skips.append(StaleSkip(sid, request.timer_condition_id, index))
            engine.touch(flow)
            return
        apply_skip(engine, flow, step, request.timer_condition_id, index)
        steps.advance(engine, flow, step)
        after_change(engine, flow)


def apply_skip(
    engine: Engine, flow: Flow, step: StepExec, condition_id: str, index: int | None
) -> None:
    """Mark the Timer chosen by condition ID or index as fired."""
    assert step.condition is not None
    timers = step.condition.timer_conditions
    chosen: int | None = None
    if condition_id:
        chosen = next(
            (i for i, timer in enumerate(timers) if timer.condition_id == condition_id), None
        )
    elif index is not None and 0 <= index < len(timers):
        chosen = index
    if chosen is not None:
        step.skipped_timers.add(chosen)
        engine.touch(flow, step)
