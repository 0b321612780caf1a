"""Step executions: creation from movements, the phase machine, cancellation.

``advance`` moves a Step as far as it can go now: through its locks, its wait and the
dispatch of its next method attempt (``attempts``). Serving the Steps that wait for
locks or conditions after a change is here too; ``wakeups`` decides when.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import attempts, locks, waits
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Flow, MethodState, Phase, StepExec
from dex_local_engine._rules.values import null


def ordered_steps(flow: Flow) -> list[StepExec]:
    """The Flow's active Steps in the order they were created."""
    return sorted(flow.steps.values(), key=lambda s: s.order)


def start_steps(
    engine: EngineState,
    flow: Flow,
    movements: Iterable[pb.StepMovement],
    *,
    from_id: str,
    recovery: pb.RecoveryErrorInfo | None = None,
    not_before: float | None = None,
) -> None:
    """Create Step executions for movements and move each as far as it can go."""
    created: list[StepExec] = []
    for movement in movements:
        if not movement.step_type:
            raise errors.invalid("a Step movement needs a step_type")
        number = flow.counters.get(movement.step_type, 0) + 1
        flow.counters[movement.step_type] = number
        step = StepExec(
            sid=f"{movement.step_type}-{number}",
            step_type=movement.step_type,
            number=number,
            from_id=from_id,
            step_input=movement.step_input if movement.HasField("step_input") else null(),
            options=movement.step_options,
            recovery=recovery,
            order=flow.next_order,
        )
        flow.next_order += 1
        if not_before is not None and not_before > time.time():
            step.method.retry_at = not_before  # start delay, honored before any method
        flow.steps[step.sid] = step
        engine.touch(flow, step)
        created.append(step)
    for step in created:
        advance(engine, flow, step)


def advance(engine: EngineState, flow: Flow, step: StepExec) -> None:
    """Move a Step execution forward as far as it can go now."""
    while flow.running and not step.ended:
        if step.phase is Phase.WAIT_FOR_LOCK:
            delayed_until = step.method.retry_at
            if delayed_until is not None and delayed_until > time.time():
                waits.arm_wake(engine, flow, step, delayed_until)
                return
            if step.options.skip_wait_for:
                step.results = pb.ConditionResults()
                step.phase = Phase.EXECUTE_LOCK
            elif locks.acquire(engine, flow, step.sid, step.options.wait_for_lock_attribute_keys):
                step.phase = Phase.WAIT_FOR
                step.method = MethodState(first_attempt_at=time.time())
            else:
                return
            engine.touch(flow, step)
        elif step.phase is Phase.EXECUTE_LOCK:
            if not locks.acquire(engine, flow, step.sid, step.options.execute_lock_attribute_keys):
                return
            step.phase = Phase.EXECUTE
            step.method = MethodState(first_attempt_at=time.time())
            engine.touch(flow, step)
        elif step.phase is Phase.WAITING:
            if not waits.evaluate(engine, flow, step):
                return
        else:  # a method phase
            if flow.flow_id in engine.replaying:
                return  # a reset replays recorded results; Workers get the method after
            key = (flow.flow_id, step.sid)
            if key in engine.attempts:
                return
            retry_at = step.method.retry_at
            if retry_at is not None:
                if retry_at > time.time():
                    waits.arm_wake(engine, flow, step, retry_at)
                    return
                step.method.retry_at = None
                engine.touch(flow, step)
            attempts.dispatch_attempt(engine, flow, step)
            return


def end_step(engine: EngineState, flow: Flow, step: StepExec, phase: Phase) -> None:
    """Mark a Step execution ended (completed, failed or canceled)."""
    step.phase = phase
    flow.steps.pop(step.sid, None)
    flow.ended_steps[step.sid] = phase
    engine.touch(flow, step)


def drop_runtime(engine: EngineState, flow: Flow, step: StepExec) -> None:
    """Stop every timer and task of a Step execution and free its locks.

    As in Dex, a running method hears about the cancellation only when the Step has a
    heartbeat timeout or the method has ASYNC durability; otherwise it runs to its end
    and its result is dropped.
    """
    attempt = engine.attempts.pop((flow.flow_id, step.sid), None)
    if attempt is not None:
        attempt.cancel_timers()
        durability = (
            step.options.wait_for_durability_override
            if step.phase is Phase.WAIT_FOR
            else step.options.execute_durability_override
        )
        if step.options.heartbeat_timeout_seconds > 0 or durability == pb.STEP_DURABILITY_ASYNC:
            engine.command("cancel", attempt.task)
        else:
            engine.command("abandon", attempt.task)
    wake = engine.wakes.pop((flow.flow_id, step.sid), None)
    if wake is not None:
        wake.cancel()
    locks.release(engine, flow, step.sid)


def cancel_steps(
    engine: EngineState, flow: Flow, step_types: Iterable[str], from_id: str | None
) -> None:
    """Cancel active Steps of the given types (only those from ``from_id`` if set)."""
    types = set(step_types)
    if not types:
        return
    for step in ordered_steps(flow):
        if step.step_type in types and (from_id is None or step.from_id == from_id):
            drop_runtime(engine, flow, step)
            for message in flow.inflight.pop(step.sid, []):
                engine.store.delete_message(flow.flow_id, message.seq)
            end_step(engine, flow, step, Phase.CANCELED)
    wake_lock_waiters(engine, flow)


def wake_lock_waiters(engine: EngineState, flow: Flow) -> None:
    """Let Steps waiting for locks try again, in Step order."""
    for step in ordered_steps(flow):
        if step.phase in (Phase.WAIT_FOR_LOCK, Phase.EXECUTE_LOCK):
            advance(engine, flow, step)


def wake_waiting(engine: EngineState, flow: Flow) -> None:
    """Let Steps waiting for their condition look at it again, in Step order."""
    for step in ordered_steps(flow):
        if step.phase is Phase.WAITING:
            advance(engine, flow, step)


def is_async(flow: Flow, step: StepExec) -> bool:
    """Whether the Step's current method runs with ASYNC durability, resolved as Dex
    Server does: the method's override, else SYNC for a method with a recovery policy,
    else the Flow's configured default, else ASYNC."""
    options = step.options
    if step.phase is Phase.WAIT_FOR:
        override = options.wait_for_durability_override
        recovers = options.wait_for_failure_policy == (
            pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE
        )
    else:
        override = options.execute_durability_override
        recovers = bool(
            options.execute_failure_policy
            == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
            and options.execute_failure_proceed_step_type
        )
    if override != pb.STEP_DURABILITY_UNSPECIFIED:
        return override == pb.STEP_DURABILITY_ASYNC
    if recovers:
        return False
    configured = flow.config.step_durability
    return configured in (pb.STEP_DURABILITY_UNSPECIFIED, pb.STEP_DURABILITY_ASYNC)
