"""What a finished method does to its Flow: results, failures, their history events."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import effects, flows, locks, steps, subflows, waits
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.decisions import FlowEffect, plan_close
from dex_local_engine._rules.model import Flow, Phase, StaleSkip, StepExec
from dex_local_engine._rules.validation import (
    options_proceed_on_wait_for_failure,
    trusted_movements,
)
from dex_local_engine._rules.values import stamp
from dex_local_engine.attempt_progress import StepAttemptProgress, with_attempt_progress


def recovery_error_info(detail: str, error_type: str, *, started: bool) -> pb.RecoveryErrorInfo:
    """The recovery error a failure route's Step gets, with whether an attempt started."""
    progress = StepAttemptProgress.NOT_COMPLETED if started else StepAttemptProgress.NOT_STARTED
    return with_attempt_progress(
        pb.RecoveryErrorInfo(detail=detail, error_type=error_type), progress
    )


def method_failed(
    engine: EngineState, flow: Flow, step: StepExec, error: pb.WorkerErrorResponse
) -> None:
    """A method that used up its retries: record it, then proceed or fail the Flow."""
    method = step.method
    is_wait_for = step.phase is Phase.WAIT_FOR
    recovery = recovery_error_info(
        error.detail, error.error_type, started=method.started_attempts > 0
    )
    failure = pb.StepMethodFailedOutput(
        failure=pb.StepMethodFailure(
            backend_error=error.detail,
            details=pb.ServiceErrorResponse(
                detail=error.detail,
                sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                original_worker_error_detail=error.detail,
                original_worker_error_type=error.error_type,
                original_worker_error_status=error.grpc_status,
                original_worker_error_stack_trace=error.stack_trace,
            ),
            attempt=method.attempt,
        )
    )
    locks.release(engine, flow, step.sid)
    if is_wait_for:
        _record_method_event(engine, flow, step, "step_wait_for_failed", failure)
        if options_proceed_on_wait_for_failure(step.options):
            step.wait_for_failed = True
            step.recovery = recovery
            step.results = pb.ConditionResults(wait_for_failed=True)
            step.phase = Phase.EXECUTE_LOCK
            engine.touch(flow, step)
            steps.advance(engine, flow, step)
            return
    else:
        _record_method_event(engine, flow, step, "step_execute_failed", failure)
        options = step.options
        if (
            options.execute_failure_policy
            == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
            and options.execute_failure_proceed_step_type
        ):
            for message in flow.inflight.pop(step.sid, []):
                engine.store.delete_message(flow.flow_id, message.seq)
            steps.end_step(engine, flow, step, Phase.FAILED)
            movement = pb.StepMovement(
                step_type=options.execute_failure_proceed_step_type,
                step_input=step.step_input,
                step_options=options.execute_failure_proceed_step_options,
            )
            steps.start_steps(engine, flow, [movement], from_id=step.sid, recovery=recovery)
            return
    steps.end_step(engine, flow, step, Phase.FAILED)
    # As in Dex, the Flow's error message is the Worker error's detail, unchanged.
    flows.close_flow(
        engine, flow, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, error.detail
    )


def _event_context(step: StepExec) -> pb.StepMethodEventContext:
    return pb.StepMethodEventContext(
        step_execution_id=step.sid,
        from_step_execution_id=step.from_id,
        step_type=step.step_type,
        final_attempt=step.method.attempt,
        started_time=stamp(step.method.first_attempt_at),
    )


def _apply_result_effects(
    engine: EngineState,
    flow: Flow,
    result: pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse,
) -> None:
    """Apply the Attribute writes and Channel changes a method result carries."""
    effects.apply_effects(
        engine,
        flow,
        list(result.upsert_attributes),
        list(result.publish_to_channel),
        list(result.delete_from_channel),
        strict=False,
    )


def _record_method_event(
    engine: EngineState,
    flow: Flow,
    step: StepExec,
    kind: str,
    output: pb.StepWaitForCompletedOutput
    | pb.StepExecuteCompletedOutput
    | pb.StepMethodFailedOutput,
) -> None:
    """Record the end of a Step method: ``kind`` names the history event's field; every
    such event carries the Step's input, the method's output and its context."""
    event = pb.FlowHistoryEvent()
    entry = getattr(event, kind)
    entry.input.step_input.CopyFrom(step.step_input)
    if kind.startswith("step_execute") and step.results is not None:
        # What the wait handed to execute; a reset replays it to the same point.
        entry.input.condition_results.CopyFrom(step.results)
    entry.output.CopyFrom(output)
    entry.context.CopyFrom(_event_context(step))
    engine.record(flow, event)


def wait_for_completed(
    engine: EngineState, flow: Flow, step: StepExec, result: pb.InvokeWaitForMethodResponse
) -> None:
    """Apply a wait_for result and move the Step to waiting or to execute."""
    _apply_result_effects(engine, flow, result)
    for kv in result.upsert_step_exe_locals:
        step.locals[kv.key] = kv.value
    _record_method_event(
        engine,
        flow,
        step,
        "step_wait_for_completed",
        pb.StepWaitForCompletedOutput(
            wait_for_condition=result.waiting_condition,
            upsert_attributes=result.upsert_attributes,
            publish_to_channel=result.publish_to_channel,
            record_events=result.record_events,
            upsert_step_execution_locals=result.upsert_step_exe_locals,
            delete_from_channel=result.delete_from_channel,
        ),
    )
    locks.release(engine, flow, step.sid)
    if result.HasField("waiting_condition"):
        step.condition = result.waiting_condition
        step.wait_started = engine.now(flow)
        step.phase = Phase.WAITING
        if step.condition.sub_flow_conditions:
            subflows.start_children(engine, flow, step)
        remaining: list[StaleSkip] = []
        for skip in flow.stale_skips:
            if skip.sid == step.sid:
                waits.apply_skip(engine, flow, step, skip.condition_id, skip.index)
            else:
                remaining.append(skip)
        if len(remaining) != len(flow.stale_skips):
            flow.stale_skips = remaining
            engine.touch(flow)
    else:
        step.results = pb.ConditionResults()
        step.phase = Phase.EXECUTE_LOCK
    engine.touch(flow, step)
    steps.advance(engine, flow, step)


def execute_completed(
    engine: EngineState, flow: Flow, step: StepExec, result: pb.InvokeExecuteMethodResponse
) -> None:
    """Apply an execute result: its effects, cancellations, close plan, next Steps."""
    _apply_result_effects(engine, flow, result)
    _record_method_event(
        engine,
        flow,
        step,
        "step_execute_completed",
        pb.StepExecuteCompletedOutput(
            step_decision=result.step_decision,
            upsert_attributes=result.upsert_attributes,
            publish_to_channel=result.publish_to_channel,
            record_events=result.record_events,
            delete_from_channel=result.delete_from_channel,
        ),
    )
    for message in flow.inflight.pop(step.sid, []):
        engine.store.delete_message(flow.flow_id, message.seq)
    locks.release(engine, flow, step.sid)
    steps.end_step(engine, flow, step, Phase.COMPLETED)
    decision = result.step_decision
    steps.cancel_steps(engine, flow, decision.cancel_step_types, None)
    steps.cancel_steps(engine, flow, decision.cancel_sibling_step_types, step.from_id)
    plan = plan_close(decision, lambda name: _channel_drained(flow, name))
    if plan.output is not None:
        flow.outputs.append(
            pb.StepCompletionOutput(
                completed_step_type=step.step_type,
                completed_step_execution_id=step.sid,
                completed_step_output=plan.output,
            )
        )
    if plan.effect is FlowEffect.FAIL:
        flows.close_flow(
            engine,
            flow,
            pb.FLOW_STATUS_FAILED,
            pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
            plan.reason,
        )
        return
    if plan.effect is FlowEffect.COMPLETE:
        flows.close_flow(engine, flow, pb.FLOW_STATUS_COMPLETED, 0, "")
        return
    if plan.effect is FlowEffect.GRACEFUL:
        flow.graceful = True
    if plan.output is not None or plan.effect is FlowEffect.GRACEFUL:
        engine.touch(flow)
    if plan.start_next_steps:
        steps.start_steps(engine, flow, trusted_movements(decision.next_steps), from_id=step.sid)
    flows.check_graceful(engine, flow)


def _channel_drained(flow: Flow, name: str) -> bool:
    if flow.channel_size(name):
        return False
    return not any(m.channel == name for msgs in flow.inflight.values() for m in msgs)
