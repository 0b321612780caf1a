"""What comes back from a Step method attempt: frames, timeouts, lost Workers, retries.

Each function here is a transition entered from above (the ``Engine``'s ``on_*``
events): a Worker took the task, sent a frame, went away, or the attempt timed out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import outcomes, waits, wakeups
from dex_local_engine._machine.state import Attempt, EngineState
from dex_local_engine._machine.work import Task
from dex_local_engine._rules.limits import VALUE_TOO_LARGE_ERROR_TYPE
from dex_local_engine._rules.model import Flow, Phase, StepExec
from dex_local_engine._rules.retry import next_retry_delay
from dex_local_engine._rules.validation import result_problem

_LOG = logging.getLogger("dex_local_engine")


def _attempt_of(engine: EngineState, task: Task) -> Attempt | None:
    if task.kind == "rpc":
        return None
    payload = task.payload
    assert not isinstance(payload, pb.InvokeWorkerRPCRequest)
    attempt = engine.attempts.get((task.flow_id, payload.context.step_execution_id))
    if attempt is None or attempt.task is not task:
        return None
    return attempt


def on_assigned(engine: EngineState, task: Task) -> None:
    """A Worker took the attempt: it runs now, and its heartbeat timeout starts."""
    attempt = _attempt_of(engine, task)
    if attempt is None:
        return
    flow, step = attempt.flow, attempt.step
    with engine.tx():
        step.method.running = True
        engine.touch(flow, step)
    _arm_heartbeat(engine, attempt)


def _arm_heartbeat(engine: EngineState, attempt: Attempt) -> None:
    seconds = attempt.step.options.heartbeat_timeout_seconds
    if seconds <= 0:
        return
    seconds = max(seconds, engine.min_heartbeat_timeout)
    if attempt.heartbeat_timer is not None:
        attempt.heartbeat_timer.cancel()
    attempt.heartbeat_timer = asyncio.get_running_loop().call_later(
        seconds, partial(_on_heartbeat_timeout, engine), attempt, seconds
    )


def on_method_timeout(engine: EngineState, attempt: Attempt, seconds: int) -> None:
    """The attempt ran past its method timeout: it is cancelled and fails."""
    _time_out(
        engine,
        attempt,
        f"{attempt.task.kind} method timeout: the attempt ran past {seconds} seconds",
        "dex_local_engine.MethodTimeout",
    )


def _on_heartbeat_timeout(engine: EngineState, attempt: Attempt, seconds: float) -> None:
    _time_out(
        engine,
        attempt,
        f"heartbeat timeout: no heartbeat within {seconds:g} seconds",
        "dex_local_engine.HeartbeatTimeout",
    )


def _time_out(engine: EngineState, attempt: Attempt, detail: str, error_type: str) -> None:
    flow, step, task = attempt.flow, attempt.step, attempt.task
    if engine.attempts.get((flow.flow_id, step.sid)) is not attempt or task.done:
        return
    started = task.started
    engine.command("cancel", task)
    error = pb.WorkerErrorResponse(
        detail=detail,
        error_type=error_type,
        grpc_status=grpc.StatusCode.DEADLINE_EXCEEDED.value[0],
    )
    with engine.tx():
        attempt_failed(engine, flow, step, error, started=started)
        wakeups.after_change(engine, flow)


def on_lost(engine: EngineState, task: Task, started: bool, detail: str) -> None:
    """The attempt's Worker went away (or the task cannot be delivered): it fails."""
    attempt = _attempt_of(engine, task)
    if attempt is None or engine.closing:
        # While the engine stops, its streams end too: the attempt stays marked as
        # running and counts as failed when the engine starts again.
        return
    # A task too large to deliver would be refused the same way again: no retry.
    lost = grpc.StatusCode.RESOURCE_EXHAUSTED if task.undeliverable else grpc.StatusCode.UNAVAILABLE
    error = pb.WorkerErrorResponse(
        detail=detail,
        error_type="dex_local_engine.TaskTooLarge"
        if task.undeliverable
        else "dex_local_engine.WorkerLost",
        grpc_status=lost.value[0],
    )
    with engine.tx():
        attempt_failed(
            engine,
            attempt.flow,
            attempt.step,
            error,
            started=started,
            retry=not task.undeliverable,
        )
        wakeups.after_change(engine, attempt.flow)


def on_frame(engine: EngineState, task: Task, frame: pb.PollWorkerTaskFrame) -> None:
    """A frame of the attempt: a heartbeat, a Stream write, its result or its error."""
    attempt = _attempt_of(engine, task)
    if attempt is None:
        return
    flow, step = attempt.flow, attempt.step
    kind = frame.WhichOneof("output")
    if kind == "worker_error":
        # A result refused for its size would come back the same: no retry.
        oversized = frame.worker_error.error_type == VALUE_TOO_LARGE_ERROR_TYPE
        with engine.tx():
            attempt_failed(
                engine, flow, step, frame.worker_error, started=True, retry=not oversized
            )
            wakeups.after_change(engine, flow)
        return
    output = frame.wait_for if kind == "wait_for" else frame.execute
    which = output.WhichOneof("output")
    if which == "heartbeat":
        heartbeat = output.heartbeat
        checkpoint = heartbeat.value if heartbeat.HasField("value") else None
        if checkpoint != step.method.checkpoint:  # a bare liveness beat writes nothing
            with engine.tx():
                step.method.checkpoint = checkpoint
                engine.touch(flow, step)
        _arm_heartbeat(engine, attempt)
    elif which == "stream_write":
        write = output.stream_write
        if write.stream_name and write.HasField("value"):
            engine.streams.write(
                flow_type=flow.flow_type,
                stream=write.stream_name,
                flow_id=flow.flow_id,
                value=write.value,
                capacity=int(write.stream_capacity_bytes),
                source=f"#{step.sid}",
            )
        _arm_heartbeat(engine, attempt)
    elif which == "result":
        problem = result_problem(frame, engine.attribute_tables)
        if problem is not None:
            # Dex rejects such a result: the attempt fails and the Step's policy applies.
            with engine.tx():
                attempt_failed(
                    engine,
                    flow,
                    step,
                    pb.WorkerErrorResponse(
                        detail=problem,
                        error_type="dex_local_engine.InvalidResult",
                        grpc_status=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                    ),
                    started=True,
                )
                wakeups.after_change(engine, flow)
            return
        engine.attempts.pop((flow.flow_id, step.sid), None)
        attempt.cancel_timers()
        with engine.tx():
            step.method.running = False
            if kind == "wait_for" and step.phase is Phase.WAIT_FOR:
                outcomes.wait_for_completed(engine, flow, step, frame.wait_for.result)
            elif kind == "execute" and step.phase is Phase.EXECUTE:
                outcomes.execute_completed(engine, flow, step, frame.execute.result)
            wakeups.after_change(engine, flow)


def attempt_failed(
    engine: EngineState,
    flow: Flow,
    step: StepExec,
    error: pb.WorkerErrorResponse,
    *,
    started: bool,
    retry: bool = True,
    log: bool = True,
) -> None:
    """An attempt failed: retry after the policy's backoff (unless ``retry`` is false),
    or fail the method. ``log=False`` leaves the INFO line to the caller, which logs
    many such failures of one cause as one line."""
    attempt = engine.attempts.pop((flow.flow_id, step.sid), None)
    if attempt is not None:
        attempt.cancel_timers()
    method = step.method
    method.running = False
    method.last_error = error
    if started:
        method.started_attempts += 1
    is_wait_for = step.phase is Phase.WAIT_FOR
    options = step.options
    has_policy = options.HasField(
        "wait_for_retry_policy" if is_wait_for else "execute_retry_policy"
    )
    policy = (
        (options.wait_for_retry_policy if is_wait_for else options.execute_retry_policy)
        if has_policy
        else None
    )
    now = time.time()
    try:
        delay = next_retry_delay(
            policy,
            attempt=method.attempt,
            first_attempt_at=method.first_attempt_at,
            now=now,
            retry_after_seconds=float(error.retry_after_seconds) or None,
        )
    except ValueError as invalid_policy:  # accepted before validation existed
        _LOG.warning("flow %s step %s: %s", flow.flow_id, step.sid, invalid_policy)
        delay = None
    _LOG.log(
        logging.INFO if log else logging.DEBUG,
        "flow %s step %s %s attempt %d failed: %s",
        flow.flow_id,
        step.sid,
        step.phase.value,
        method.attempt,
        error.detail,
    )
    engine.touch(flow, step)
    if delay is not None and retry:
        method.attempt += 1
        method.retry_at = now + delay
        waits.arm_wake(engine, flow, step, method.retry_at)
        return
    outcomes.method_failed(engine, flow, step, error)
