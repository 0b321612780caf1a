"""Replaying an old run's history into a new run, up to a reset point.

A reset to a point after the beginning rebuilds the old run's state at that point the
way the engine built it the first time: the recorded method results, RPCs and
publishes go through the same transitions (``outcomes``, ``effects``, ``steps``) in
their original order, with the engine's clock set to each event's time, so Step
execution IDs, Attributes, Channels, locks and waiting conditions come out the same,
and a Timer keeps the fire time it had (a Timer that fired meanwhile fires at once).
Timers that came due between two events fire before the later one. No method
reaches a Worker while the replay runs; the Steps active at the reset point get
theirs after it, which reruns the Step the point names.
"""

from __future__ import annotations

import logging

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import effects, outcomes, steps, wakeups
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.constants import RPC_FROM_PREFIX
from dex_local_engine._rules.model import Flow, MethodState, Phase, StepExec
from dex_local_engine._rules.reset_points import ResetPoint, event_seconds
from dex_local_engine._rules.validation import trusted_movements

_LOG = logging.getLogger("dex_local_engine")

OUTSIDE_WRITES = ("rpc_execution_completed", "channel_external_publish")


def replay(
    engine: EngineState, flow: Flow, events: list[pb.FlowHistoryEvent], point: ResetPoint
) -> int:
    """Replay ``events`` (the old run's, after its start) into ``flow`` until the reset
    point; returns how many were replayed. The caller holds the transaction and has
    put the Flow in ``engine.replaying``."""
    for index, event in enumerate(events):
        if _reached(flow, point) or (point.before_event and event.event_id >= point.before_event):
            return index
        engine.replay_clocks[flow.flow_id] = event_seconds(event)
        wakeups.after_change(engine, flow)  # Timers due before this event fire first
        if _reached(flow, point) or not flow.running:
            return index
        _apply(engine, flow, event)
    return len(events)


def _reached(flow: Flow, point: ResetPoint) -> bool:
    if not point.step_execution_id:
        return False
    step = flow.steps.get(point.step_execution_id)
    if step is None:
        return False
    return step.phase is Phase.EXECUTE if point.execute else True


def apply_outside_write(engine: EngineState, flow: Flow, event: pb.FlowHistoryEvent) -> None:
    """Apply a recorded RPC result or external publish again, and record it again."""
    if event.HasField("channel_external_publish"):
        published = event.channel_external_publish
        effects.apply_effects(engine, flow, [], list(published.messages), [], strict=False)
        engine.record(flow, pb.FlowHistoryEvent(channel_external_publish=published))
        return
    rpc = event.rpc_execution_completed
    effects.apply_effects(
        engine,
        flow,
        list(rpc.upsert_attributes),
        list(rpc.publish_to_channel),
        list(rpc.delete_from_channel),
        strict=False,
    )
    engine.record(flow, pb.FlowHistoryEvent(rpc_execution_completed=rpc))
    decision = rpc.step_decision
    steps.cancel_steps(engine, flow, decision.cancel_step_types, None)
    steps.start_steps(
        engine,
        flow,
        trusted_movements(decision.next_steps),
        from_id=f"{RPC_FROM_PREFIX}{rpc.rpc_name}",
    )


def _apply(engine: EngineState, flow: Flow, event: pb.FlowHistoryEvent) -> None:
    kind = event.WhichOneof("payload")
    if kind in OUTSIDE_WRITES:
        apply_outside_write(engine, flow, event)
    elif kind == "step_wait_for_completed":
        done = event.step_wait_for_completed
        step = _step_at(engine, flow, done.context, Phase.WAIT_FOR, None)
        if step is not None:
            outcomes.wait_for_completed(engine, flow, step, _wait_for_result(done.output))
    elif kind == "step_execute_completed":
        done = event.step_execute_completed
        results = done.input.condition_results
        step = _step_at(engine, flow, done.context, Phase.EXECUTE, results)
        if step is not None:
            output = done.output
            result = pb.InvokeExecuteMethodResponse(
                step_decision=output.step_decision,
                upsert_attributes=output.upsert_attributes,
                publish_to_channel=output.publish_to_channel,
                record_events=output.record_events,
                delete_from_channel=output.delete_from_channel,
            )
            outcomes.execute_completed(engine, flow, step, result)
    elif kind in ("step_wait_for_failed", "step_execute_failed"):
        failed = getattr(event, kind)
        phase = Phase.WAIT_FOR if kind == "step_wait_for_failed" else Phase.EXECUTE
        step = _step_at(engine, flow, failed.context, phase, failed.input.condition_results)
        if step is not None:
            outcomes.method_failed(engine, flow, step, _worker_error(failed.output.failure))
    # Pending-method, close, continue and fork events carry nothing to replay.


def _step_at(
    engine: EngineState,
    flow: Flow,
    context: pb.StepMethodEventContext,
    phase: Phase,
    results: pb.ConditionResults | None,
) -> StepExec | None:
    """The Step execution an event names, in the method phase the event ends.

    The replay normally brings it there by itself; when it did not (a lock or a
    Timer that resolved differently), the recorded condition results decide, so the
    new run follows the old one."""
    step = flow.steps.get(context.step_execution_id)
    if step is None:
        _LOG.warning(
            "reset of %s: history names Step %s, which the replay did not start",
            flow.flow_id,
            context.step_execution_id,
        )
        return None
    if step.phase is not phase:
        if phase is Phase.EXECUTE and results is not None:
            _take_recorded(engine, flow, step, results)
        step.phase = phase
    step.method = MethodState(
        attempt=max(1, context.final_attempt),
        first_attempt_at=context.started_time.ToNanoseconds() / 1e9,
        started_attempts=max(1, context.final_attempt),
    )
    engine.touch(flow, step)
    return step


def _take_recorded(
    engine: EngineState, flow: Flow, step: StepExec, results: pb.ConditionResults
) -> None:
    """Give a Step the Channel messages its recorded condition results took."""
    wake = engine.wakes.pop((flow.flow_id, step.sid), None)
    if wake is not None:
        wake.cancel()
    consumed = flow.inflight.setdefault(step.sid, [])
    for result in results.channel_results:
        queue = flow.channels.get(result.channel_name)
        for _ in result.values:
            if not queue:
                break
            message = queue.popleft()
            consumed.append(message)
            engine.store.consume_message(flow.flow_id, message.seq, step.sid)
    if not consumed:
        flow.inflight.pop(step.sid, None)
    step.results = results


def _wait_for_result(output: pb.StepWaitForCompletedOutput) -> pb.InvokeWaitForMethodResponse:
    result = pb.InvokeWaitForMethodResponse(
        upsert_attributes=output.upsert_attributes,
        publish_to_channel=output.publish_to_channel,
        record_events=output.record_events,
        upsert_step_exe_locals=output.upsert_step_execution_locals,
        delete_from_channel=output.delete_from_channel,
    )
    if output.HasField("wait_for_condition"):
        result.waiting_condition.CopyFrom(output.wait_for_condition)
    return result


def _worker_error(failure: pb.StepMethodFailure) -> pb.WorkerErrorResponse:
    details = failure.details
    return pb.WorkerErrorResponse(
        detail=details.original_worker_error_detail or failure.backend_error,
        error_type=details.original_worker_error_type,
        grpc_status=details.original_worker_error_status,
        stack_trace=details.original_worker_error_stack_trace,
    )
