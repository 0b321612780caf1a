"""ResetFlow (time travel) to the beginning of a run.

Resetting to BEGINNING starts a new run of the same Flow ID from the first run's
start: the same start Step, input, options, initial Attributes, config and timeout
(counted from the reset). A running run is terminated first ("reset"). Then, unless
``skip_writes_reapply``, the writes that came from outside the Flow are applied
again in their original order: the effects of RPCs (Attribute writes, Channel
publications and deletions, next Steps and cancellations) and external publishes,
as Dex Server re-applies the signals and updates of the old run. The new run's
history records a ``time_travel_fork`` event naming the previous run.

SubFlows started again by the new run meet their existing children under the same
IDs; a new parent run means a new request ID, so the SubFlow reuse policy decides.
Resetting to a point in time or to a Step execution is not supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import effects, errors, flows, steps, waits
from dex_local_engine.constants import RPC_FROM_PREFIX
from dex_local_engine.model import Flow
from dex_local_engine.validation import trusted_movements

if TYPE_CHECKING:
    from dex_local_engine.engine import Engine


def reset_flow(engine: Engine, request: pb.ResetFlowRequest) -> pb.ResetFlowResponse:
    """Start a new run from the old run's beginning and re-apply its outside writes."""
    flow = engine.flow(request.flow_id, active=False)
    if request.run_id and request.run_id != flow.run_id:
        raise errors.flow_not_found(f"{flow.flow_id}/{request.run_id}", active=False)
    if request.reset_type != pb.FLOW_RESET_TYPE_BEGINNING:
        name = pb.FlowResetType.Name(request.reset_type)
        raise errors.invalid(f"ResetFlow supports FLOW_RESET_TYPE_BEGINNING only, not {name}")
    events: list[pb.FlowHistoryEvent] = []
    for data in engine.store.events(flow.flow_id, 1, 1_000_000_000):
        event = pb.FlowHistoryEvent()
        event.ParseFromString(data)
        events.append(event)
    started = next((e for e in events if e.HasField("flow_started_or_continued")), None)
    if started is None or not started.flow_started_or_continued.HasField("initial_start"):
        raise errors.invalid(f"Flow {flow.flow_id!r} has no start to reset to")
    start = started.flow_started_or_continued.initial_start
    outside = [
        event
        for event in events
        if event.HasField("rpc_execution_completed") or event.HasField("channel_external_publish")
    ]
    previous_run = flow.run_id
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
    with engine.tx():
        if flow.running:
            flows.close_flow(engine, flow, pb.FLOW_STATUS_TERMINATED, 0, request.reason or "reset")
        parent = flow.parent
        run_id = flows.start_flow(engine, restart, parent=parent)
        new = engine.flows[flow.flow_id]
        engine.record(
            new,
            pb.FlowHistoryEvent(
                time_travel_fork=pb.TimeTravelForkHistoryEvent(previous_run_id=previous_run)
            ),
        )
        if not request.skip_writes_reapply:
            for event in outside:
                _reapply(engine, new, event)
        waits.after_change(engine, new)
    return pb.ResetFlowResponse(run_id=run_id)


def _reapply(engine: Engine, flow: Flow, event: pb.FlowHistoryEvent) -> None:
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
