"""Direct state calls older SDKs make: PublishToChannel, SetAttributes, GetAttributes."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import effects, wakeups
from dex_local_engine._machine.state import EngineState, load_closed_attributes
from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Flow


def publish(engine: EngineState, request: pb.PublishToChannelRequest) -> None:
    """PublishToChannel from outside the Flow, recorded as an external publish."""
    flow = engine.flow(request.flow_id, active=True)
    _check_run(flow, request.run_id)
    if any(not message.channel_name for message in request.messages):
        raise errors.invalid("every message needs a channel_name")
    with engine.tx():
        effects.apply_effects(engine, flow, [], list(request.messages), [], strict=False)
        engine.record(
            flow,
            pb.FlowHistoryEvent(
                channel_external_publish=pb.ChannelExternalPublishEvent(messages=request.messages)
            ),
        )
        wakeups.after_change(engine, flow)


def set_attributes(engine: EngineState, request: pb.SetAttributesRequest) -> None:
    """SetAttributes from outside the Flow."""
    flow = engine.flow(request.flow_id, active=True)
    _check_run(flow, request.run_id)
    if any(not write.key for write in request.attributes):
        raise errors.invalid("every Attribute write needs a key")
    with engine.tx():
        effects.apply_attribute_writes(engine, flow, request.attributes)
        wakeups.after_change(engine, flow)


def get_attributes(
    engine: EngineState, request: pb.GetAttributesRequest
) -> pb.GetAttributesResponse:
    """GetAttributes of a running or closed Flow."""
    flow = engine.flow(request.flow_id, active=False)
    _check_run(flow, request.run_id)
    if not flow.running:
        load_closed_attributes(engine, flow)
    keys = list(flow.attributes) if request.all_keys else list(request.keys)
    return pb.GetAttributesResponse(
        attributes=[
            pb.KV(key=key, value=flow.attributes[key]) for key in keys if key in flow.attributes
        ]
    )


def _check_run(flow: Flow, run_id: str) -> None:
    if run_id and run_id != flow.run_id:
        raise errors.flow_not_found(f"{flow.flow_id}/{run_id}", active=flow.running)
