"""Flow lifecycle: start (with ID reuse and the timeout handler), stop, Flow timeouts,
close, graceful completion, and a SubFlow's close reaching its waiting parent."""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import cast

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import children, effects, steps
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import errors
from dex_local_engine._rules.constants import TIMEOUT_HANDLER_STEP_TYPE
from dex_local_engine._rules.decisions import graceful_completion_due
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.model import Flow, Phase, StepExec
from dex_local_engine._rules.validation import validate_flow_config, validate_step_options
from dex_local_engine._rules.values import null, uuid7

_LOG = logging.getLogger("dex_local_engine")


def start_flow(engine: EngineState, request: pb.StartFlowRequest, *, parent: str = "") -> str:
    """Start a run under the ID reuse policy; returns its run ID. ``parent`` links a
    SubFlow to the Step execution waiting for it."""
    if not request.flow_id:
        raise errors.invalid("StartFlow needs a flow_id")
    if not request.flow_type:
        raise errors.invalid("StartFlow needs a flow_type")
    validate_step_options(request.step_options)
    options = request.flow_start_options
    config = pb.FlowConfig()
    if options.HasField("flow_config_override"):
        config.CopyFrom(options.flow_config_override)
    validate_flow_config(config, engine.attribute_tables)
    existing = engine.flows.get(request.flow_id)
    policy = options.id_reuse_policy or pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING
    with engine.tx():
        if existing is not None:
            if existing.running:
                if policy != pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                    return _already_started_or_same(engine, request, existing)
                close_flow(
                    engine, existing, pb.FLOW_STATUS_TERMINATED, 0, "terminated by a new start"
                )
            elif policy == pb.ID_REUSE_POLICY_DISALLOW_REUSE or (
                policy == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
                and existing.status == pb.FLOW_STATUS_COMPLETED
            ):
                return _already_started_or_same(engine, request, existing)
            _forget(engine, existing)
        flow = Flow(
            flow_id=request.flow_id,
            run_id=uuid7(),
            flow_type=request.flow_type,
            request_id=request.request_id,
            start_time=time.time(),
            config=config,
            timeout_seconds=max(0, request.flow_timeout_seconds),
            timeout_policy=request.flow_timeout_policy,
            parent=parent,
        )
        engine.flows[flow.flow_id] = flow
        engine.locks[flow.flow_id] = {}
        engine.touch(flow)
        writes = list(options.attributes)
        effects.apply_attribute_writes(engine, flow, writes)
        step_input = request.step_input if request.HasField("step_input") else null()
        event = pb.FlowHistoryEvent(
            flow_started_or_continued=pb.FlowStartedOrContinuedHistoryEvent(
                flow_execution_id=pb.FlowExecutionID(flow_id=flow.flow_id, run_id=flow.run_id),
                flow_type=flow.flow_type,
                flow_config=config,
                initial_start=pb.FlowInitialStart(
                    start_step_type=request.start_step_type,
                    step_input=step_input,
                    step_options=request.step_options,
                    initial_attributes=[pb.KV(key=w.key, value=w.value) for w in writes],
                ),
            )
        )
        engine.record(flow, event)
        arm_flow_timeout(engine, flow)
        if flow.timeout_seconds > 0 and flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
            _start_timeout_handler(engine, flow, options.timeout_handler_options)
        if request.start_step_type:  # a Flow may start without a Step and wait for RPCs
            movement = pb.StepMovement(
                step_type=request.start_step_type,
                step_input=step_input,
                step_options=request.step_options,
            )
            delay = max(0, options.flow_start_delay_seconds)
            steps.start_steps(
                engine, flow, [movement], from_id="", not_before=flow.start_time + delay
            )
    return flow.run_id


def _start_timeout_handler(
    engine: EngineState, flow: Flow, handler: pb.FlowTimeoutHandlerOptions
) -> None:
    """The HANDLER timeout policy: a Step waiting on one Timer, then Flow.handle_timeout."""
    options = pb.StepOptions(
        skip_wait_for=True,
        execute_timeout_seconds=handler.method_timeout_seconds,
        heartbeat_timeout_seconds=handler.heartbeat_timeout_seconds,
        execute_failure_policy=handler.failure_policy,
        execute_failure_proceed_step_type=handler.failure_proceed_step_type,
        execute_durability_override=handler.durability_override,
        execute_lock_attribute_keys=handler.lock_attribute_keys,
        execute_load_attribute_map_instances=handler.load_attribute_map_instances,
        execute_load_channel_names=handler.load_channel_names,
        execute_load_channel_map_instances=handler.load_channel_map_instances,
    )
    if handler.HasField("retry_policy"):
        options.execute_retry_policy.CopyFrom(handler.retry_policy)
    if handler.HasField("failure_proceed_step_options"):
        options.execute_failure_proceed_step_options.CopyFrom(handler.failure_proceed_step_options)
    flow.counters[TIMEOUT_HANDLER_STEP_TYPE] = 1
    step = StepExec(
        sid=f"{TIMEOUT_HANDLER_STEP_TYPE}-1",
        step_type=TIMEOUT_HANDLER_STEP_TYPE,
        number=1,
        from_id="",
        step_input=null(),
        options=options,
        recovery=None,
        order=flow.next_order,
        phase=Phase.WAITING,
        condition=pb.WaitingCondition(
            waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
            timer_conditions=[pb.TimerCondition(duration_seconds=flow.timeout_seconds)],
        ),
        wait_started=flow.start_time,
    )
    flow.next_order += 1
    flow.steps[step.sid] = step
    engine.touch(flow, step)
    steps.advance(engine, flow, step)


def _already_started_or_same(
    engine: EngineState, request: pb.StartFlowRequest, existing: Flow
) -> str:
    """The reuse policy rejects the start: a retry of the same request that asked to
    ignore that gets the existing run, anything else the already-started error."""
    options = request.flow_start_options
    if (
        options.flow_already_started_options.ignore_already_started_error
        and request.request_id
        and request.request_id == existing.request_id
    ):
        return existing.run_id
    raise _already_started(request.flow_id)


def _already_started(flow_id: str) -> DexError:
    return DexError(
        grpc.StatusCode.ALREADY_EXISTS,
        pb.ERROR_SUB_STATUS_FLOW_ALREADY_STARTED,
        f"Flow {flow_id!r} was already started",
    )


def _forget(engine: EngineState, flow: Flow) -> None:
    for step in list(flow.steps.values()):
        steps.drop_runtime(engine, flow, step)
    timer = engine.flow_timers.pop(flow.flow_id, None)
    if timer is not None:
        timer.cancel()
    engine.store.delete_flow_data(flow.flow_id)


def stop_flow(engine: EngineState, request: pb.StopFlowRequest) -> None:
    """Cancel, terminate or fail a running Flow, as the request's stop type says."""
    flow = engine.flow(request.flow_id, active=True)
    with engine.tx():
        if request.stop_type == pb.STOP_TYPE_TERMINATE:
            close_flow(engine, flow, pb.FLOW_STATUS_TERMINATED, 0, request.reason)
        elif request.stop_type == pb.STOP_TYPE_FAIL:
            close_flow(
                engine,
                flow,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
                request.reason,
            )
        else:
            close_flow(engine, flow, pb.FLOW_STATUS_CANCELED, 0, request.reason)


def arm_flow_timeout(engine: EngineState, flow: Flow) -> None:
    """Arm the Flow timeout timer (the HANDLER policy uses a Step's Timer instead)."""
    if flow.timeout_seconds <= 0 or not flow.running:
        return
    if flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
        return  # the timeout handler Step waits on its own Timer
    delay = max(0.0, flow.start_time + flow.timeout_seconds - time.time())
    loop = asyncio.get_running_loop()
    engine.flow_timers[flow.flow_id] = loop.call_later(
        delay, partial(_on_flow_timeout, engine), flow
    )


def _on_flow_timeout(engine: EngineState, flow: Flow) -> None:
    engine.flow_timers.pop(flow.flow_id, None)
    if not flow.running or engine.flows.get(flow.flow_id) is not flow:
        return
    with engine.tx():
        if flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
            close_flow(
                engine,
                flow,
                pb.FLOW_STATUS_CANCELED,
                0,
                f"Flow timed out after {flow.timeout_seconds} seconds",
            )
        else:
            close_flow(
                engine,
                flow,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT,
                f"Flow timed out after {flow.timeout_seconds} seconds",
            )


def close_flow(engine: EngineState, flow: Flow, status: int, error_type: int, message: str) -> None:
    """Close a running Flow: cancel its Steps, free its locks, record the close."""
    if not flow.running:
        return
    for step in steps.ordered_steps(flow):
        steps.drop_runtime(engine, flow, step)
        for message_row in flow.inflight.pop(step.sid, []):
            engine.store.delete_message(flow.flow_id, message_row.seq)
        steps.end_step(engine, flow, step, Phase.CANCELED)
    engine.locks[flow.flow_id] = {}
    timer = engine.flow_timers.pop(flow.flow_id, None)
    if timer is not None:
        timer.cancel()
    flow.status = status
    flow.close_time = time.time()
    flow.error_type = error_type
    flow.error_message = message if error_type else ""
    # As on Dex, a terminate's reason reaches the history's close event, not the result.
    closed_message = message if status == pb.FLOW_STATUS_TERMINATED else flow.error_message
    _LOG.info(
        "flow %s closed: %s %s",
        flow.flow_id,
        pb.FlowStatus.Name(cast(pb.FlowStatus, status)),
        message,
    )
    engine.record(
        flow,
        pb.FlowHistoryEvent(
            flow_closed=pb.FlowClosedHistoryEvent(
                flow_status=cast(pb.FlowStatus, status),
                results=flow.outputs,
                error_type=cast(pb.FlowErrorType, error_type),
                error_message=closed_message,
            )
        ),
    )
    engine.touch(flow)
    _child_closed(engine, flow)


def _child_closed(engine: EngineState, child: Flow) -> None:
    """Let the parent's waiting Step see that this child closed."""
    if not child.parent:
        return
    parent_id, _, sid = child.parent.partition(children.PARENT_SEPARATOR)
    parent = engine.flows.get(parent_id)
    if parent is None or not parent.running:
        return
    step = parent.steps.get(sid)
    if step is not None and step.phase is Phase.WAITING:
        steps.advance(engine, parent, step)
        check_graceful(engine, parent)


def check_graceful(engine: EngineState, flow: Flow) -> None:
    """Complete a Flow whose graceful completion is due (no active Step left)."""
    if flow.running and graceful_completion_due(
        flow.graceful,
        ((s.step_type, s.phase is Phase.WAITING) for s in flow.steps.values()),
        TIMEOUT_HANDLER_STEP_TYPE,
    ):
        close_flow(engine, flow, pb.FLOW_STATUS_COMPLETED, 0, "")
