"""Serving waiting Steps: after a change, when a Timer comes due, and on SkipTimer.

A change of locks, Channels or Attributes can let Steps go on: the ones waiting for
locks first, then the ones waiting for their condition, each in Step order; then a
Flow whose graceful completion is due completes.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import flows, steps, waits
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Flow, Phase, StaleSkip, StepExec


def after_change(engine: EngineState, flow: Flow) -> None:
    """Serve lock waiters and waiting Steps after locks or Channels changed."""
    steps.wake_lock_waiters(engine, flow)
    steps.wake_waiting(engine, flow)
    flows.check_graceful(engine, flow)


def step_due(engine: EngineState, flow: Flow, step: StepExec) -> None:
    """A Step's Timer, retry backoff or start delay came due: advance it, then the rest."""
    with engine.tx():
        steps.advance(engine, flow, step)
        after_change(engine, flow)


def skip_timer(engine: EngineState, request: pb.SkipTimerRequest) -> None:
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
        waits.apply_skip(engine, flow, step, request.timer_condition_id, index)
        steps.advance(engine, flow, step)
        after_change(engine, flow)
