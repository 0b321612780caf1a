"""A waiting Step: its condition's evaluation over Timers, Channels and SubFlows, the
timer that wakes it, and Timers skipped by SkipTimer.

A wake-up that comes due starts a transition from above (``EngineState.on_step_due``);
``wakeups`` serves the Steps after changes.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import children
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.conditions import WaitState, evaluate_wait
from dex_local_engine._rules.model import Flow, Phase, StepExec


def evaluate(engine: EngineState, flow: Flow, step: StepExec) -> bool:
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
    closed = children.closed_children(engine, flow, step)
    outcome = evaluate_wait(condition, WaitState(frozenset(fired), sizes, closed))
    if outcome is None:
        if next_fire is not None:
            arm_wake(engine, flow, step, next_fire)
        return False
    wake = engine.wakes.pop((flow.flow_id, step.sid), None)
    if wake is not None:
        wake.cancel()
    results = pb.ConditionResults(sub_flow_results=children.results(engine, flow, step))
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


def arm_wake(engine: EngineState, flow: Flow, step: StepExec, at: float) -> None:
    """Advance the Step again at ``at`` (a Timer, a retry backoff or a start delay)."""
    key = (flow.flow_id, step.sid)
    old = engine.wakes.pop(key, None)
    if old is not None:
        old.cancel()
    loop = asyncio.get_running_loop()
    engine.wakes[key] = loop.call_later(
        max(0.0, at - time.time()), partial(_on_wake, engine), flow, step
    )


def _on_wake(engine: EngineState, flow: Flow, step: StepExec) -> None:
    engine.wakes.pop((flow.flow_id, step.sid), None)
    if not flow.running or step.ended or flow.steps.get(step.sid) is not step:
        return
    engine.on_step_due(flow, step)


def apply_skip(
    engine: EngineState, flow: Flow, step: StepExec, condition_id: str, index: int | None
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
