"""ResetFlow (time travel): a new run of the same Flow ID from a point of the old run.

The old run is terminated if it still runs ("reset"). The new run starts from the
old run's start (the same start Step, input, options, initial Attributes, config and
parent), then replays the old run's history up to the reset point (see
``reset_points`` for the points and ``replay`` for how), so what happened before the
point stays and the Steps active there run their current method again. A reset to
the beginning keeps nothing and counts the Flow timeout from the reset; any later
point keeps the old start time, so the Flow timeout and every Timer keep their
original deadlines.

Then the new run records a ``time_travel_fork`` event naming the old run, and,
unless ``skip_writes_reapply``, the writes from outside that the old run received
after the point (RPC results and external publishes) are applied again in their
original order, as Dex Server re-applies a reset run's signals and updates.

The engine keeps one run per Flow ID, so the old run's history is the one that
exists; a run that continued as new no longer has its start and cannot be reset.
SubFlows started again by the new run meet their existing children under the same
IDs; a new parent run means a new request ID, so the SubFlow reuse policy decides.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import flows, steps, wakeups
from dex_local_engine._machine.replay import OUTSIDE_WRITES, apply_outside_write, replay
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import errors, reset_points
from dex_local_engine._rules.constants import TIMEOUT_HANDLER_STEP_TYPE
from dex_local_engine._rules.model import Flow
from dex_local_engine._rules.reset_points import ResetPoint, event_seconds


def reset_flow(engine: EngineState, request: pb.ResetFlowRequest) -> pb.ResetFlowResponse:
    """Start a new run from the reset point and re-apply the later outside writes."""
    reset_points.check_request(request)
    flow = engine.flow(request.flow_id, active=False)
    if request.run_id and request.run_id != flow.run_id:
        raise errors.flow_not_found(f"{flow.flow_id}/{request.run_id}", active=False)
    events: list[pb.FlowHistoryEvent] = []
    for data in engine.store.events(flow.flow_id, 1, 1_000_000_000):
        event = pb.FlowHistoryEvent()
        event.ParseFromString(data)
        events.append(event)
    started = events[0] if events else None
    if started is None or not started.flow_started_or_continued.HasField("initial_start"):
        raise errors.invalid(
            f"Flow {flow.flow_id!r} continued as new; run {flow.run_id} has no start to reset to"
        )
    point = _point(request, events, flow)  # refuses a bad target before anything changes
    previous_run, start_time = flow.run_id, flow.start_time
    with engine.tx():
        if flow.running:
            flows.close_flow(engine, flow, pb.FLOW_STATUS_TERMINATED, 0, request.reason or "reset")
        engine.replaying.add(flow.flow_id)
        try:
            if not point.beginning:
                engine.replay_clocks[flow.flow_id] = event_seconds(started)
            new = _restart(engine, flow, started.flow_started_or_continued.initial_start)
            if not point.beginning:
                _keep_start_time(engine, new, start_time)
            replayed = 1 + replay(engine, new, events[1:], point)
        finally:
            engine.replaying.discard(flow.flow_id)
            engine.replay_clocks.pop(flow.flow_id, None)
        engine.record(
            new,
            pb.FlowHistoryEvent(
                time_travel_fork=pb.TimeTravelForkHistoryEvent(previous_run_id=previous_run)
            ),
        )
        if not request.skip_writes_reapply:
            for event in events[replayed:]:
                if event.WhichOneof("payload") in OUTSIDE_WRITES and new.running:
                    apply_outside_write(engine, new, event)
        for step in steps.ordered_steps(new):
            steps.advance(engine, new, step)
        wakeups.after_change(engine, new)
    return pb.ResetFlowResponse(run_id=new.run_id)


def _point(
    request: pb.ResetFlowRequest, events: list[pb.FlowHistoryEvent], flow: Flow
) -> ResetPoint:
    if request.reset_type == pb.FLOW_RESET_TYPE_BEGINNING:
        return ResetPoint(before_event=2)
    if request.reset_type == pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME:
        return reset_points.time_point(events, request.history_event_time, flow.run_id)
    return reset_points.step_point(request, events, flow.steps, flow.run_id)


def _restart(engine: EngineState, flow: Flow, start: pb.FlowInitialStart) -> Flow:
    """Start the new run as the old one started."""
    options = pb.FlowStartOptions(
        id_reuse_policy=pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING,
        attributes=[
            pb.AttributeWrite(key=kv.key, value=kv.value) for kv in start.initial_attributes
        ],
        flow_config_override=flow.config,
    )
    restart = pb.StartFlowRequest(
        flow_id=flow.flow_id,
        flow_type=flow.flow_type,
        start_step_type=start.start_step_type,
        step_input=start.step_input,
        step_options=start.step_options,
        flow_timeout_seconds=flow.timeout_seconds,
        flow_timeout_policy=flow.timeout_policy,  # pyright: ignore[reportArgumentType]
        flow_start_options=options,
        request_id=flow.request_id,
    )
    flows.start_flow(engine, restart, parent=flow.parent)
    return engine.flows[flow.flow_id]


def _keep_start_time(engine: EngineState, flow: Flow, start_time: float) -> None:
    """Keep the old run's start, so the Flow timeout keeps its deadline."""
    flow.start_time = start_time
    engine.touch(flow)
    timer = engine.flow_timers.pop(flow.flow_id, None)
    if timer is not None:
        timer.cancel()
    flows.arm_flow_timeout(engine, flow)
    handler = flow.steps.get(f"{TIMEOUT_HANDLER_STEP_TYPE}-1")
    if handler is not None:
        handler.wait_started = start_time
        engine.touch(flow, handler)
