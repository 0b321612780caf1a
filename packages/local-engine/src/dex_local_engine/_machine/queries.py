"""Read-only views of a Flow: summary, state and history."""

from __future__ import annotations

import time
from typing import cast

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import steps
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import worker_requests
from dex_local_engine._rules.model import Flow, Phase, StepExec
from dex_local_engine._rules.values import stamp


def flow_state(engine: EngineState, flow: Flow) -> pb.GetFlowStateResponse:
    """A partial GetFlowState: config, Attributes, active Steps and pending messages."""
    response = pb.GetFlowStateResponse(flow_config=flow.config)
    response.attributes.extend(worker_requests.attributes(flow))
    for step in steps.ordered_steps(flow):
        state = response.active_step_executions.add(
            step_execution_id=step.sid,
            from_step_execution_id=step.from_id,
            step_type=step.step_type,
            phase=pb.ACTIVE_STEP_PHASE_WAITING
            if step.phase is Phase.WAITING
            else pb.ACTIVE_STEP_PHASE_ACTIVE,
            movement=pb.StepMovement(
                step_type=step.step_type,
                step_input=step.step_input,
                step_options=step.options,
            ),
            step_execution_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
        )
        state.timers.extend(_timers(step))
        error = step.method.last_error
        if error is not None:
            state.last_failure_info.CopyFrom(
                pb.StepMethodFailure(
                    backend_error=error.detail,
                    attempt=max(1, step.method.attempt - 1)
                    if step.method.retry_at is not None
                    else step.method.attempt,
                    details=pb.ServiceErrorResponse(
                        detail=error.detail,
                        sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                        original_worker_error_detail=error.detail,
                        original_worker_error_type=error.error_type,
                        original_worker_error_status=error.grpc_status,
                        original_worker_error_stack_trace=error.stack_trace,
                    ),
                )
            )
    for name, queue in flow.channels.items():
        if queue:
            values = response.pending_channel_messages[name]
            for message in queue:
                values.messages.add(
                    channel_name=name, value=message.value, message_id=message.message_id
                )
    response.completed_steps.extend(flow.outputs)
    return response


def _timers(step: StepExec) -> list[pb.TimerInfo]:
    """A waiting Step's Timers with their firing times."""
    if step.phase is not Phase.WAITING or step.condition is None:
        return []
    now = time.time()
    timers: list[pb.TimerInfo] = []
    for index, timer in enumerate(step.condition.timer_conditions):
        fire_at = step.wait_started + max(0, timer.duration_seconds)
        if index in step.skipped_timers:
            status = pb.INTERNAL_TIMER_STATUS_SKIPPED
        elif fire_at <= now:
            status = pb.INTERNAL_TIMER_STATUS_FIRED
        else:
            status = pb.INTERNAL_TIMER_STATUS_PENDING
        timers.append(
            pb.TimerInfo(
                condition_id=timer.condition_id,
                firing_unix_timestamp_seconds=int(fire_at),
                status=status,
            )
        )
    return timers


def summary(flow: Flow) -> pb.GetFlowSummaryResponse:
    """GetFlowSummary of a running or closed Flow."""
    response = pb.GetFlowSummaryResponse(
        flow_execution_id=pb.FlowExecutionID(flow_id=flow.flow_id, run_id=flow.run_id),
        first_run_id=flow.run_id,
        request_id=flow.request_id,
        flow_type=flow.flow_type,
        flow_status=cast(pb.FlowStatus, flow.status),
        start_time=stamp(flow.start_time),
    )
    if not flow.running:
        response.close_time.CopyFrom(stamp(flow.close_time))
    return response


def history(
    engine: EngineState, flow: Flow, start_event_id: int, page_size: int
) -> pb.GetHistoryEventsResponse:
    """One page of the Flow's history events from ``start_event_id``."""
    size = page_size if page_size > 0 else 1000
    start = max(1, start_event_id)
    rows = engine.store.events(flow.flow_id, start, size + 1)
    response = pb.GetHistoryEventsResponse()
    for data in rows[:size]:
        event = response.events.add()
        event.ParseFromString(data)
    if len(rows) > size:
        response.next_internal_event_id = response.events[-1].event_id + 1
        response.next_page_token = str(response.next_internal_event_id).encode()
    return response
