"""The requests sent to Workers: context, loaded Attributes and Channel messages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules.constants import TIMEOUT_HANDLER_STEP_TYPE
from dex_local_engine._rules.model import Flow, StepExec
from dex_local_engine._rules.values import null


def _context(flow: Flow, step: StepExec) -> pb.Context:
    """The context of one Step method attempt."""
    context = pb.Context(
        flow_id=flow.flow_id,
        run_id=flow.run_id,
        flow_started_timestamp=int(flow.start_time),
        step_execution_id=step.sid,
        first_attempt_timestamp=int(step.method.first_attempt_at),
        attempt=step.method.attempt,
        from_step_execution_id=step.from_id,
    )
    if step.recovery is not None:
        context.recovery_error.CopyFrom(step.recovery)
    if step.method.checkpoint is not None:
        context.last_heartbeat_value.CopyFrom(step.method.checkpoint)
    return context


def attributes(flow: Flow, loaded_maps: Iterable[str] | None = None) -> list[pb.KV]:
    """Singleton Attributes, plus the AttributeMap instances that were loaded (every
    instance without ``loaded_maps``)."""
    if loaded_maps is None:
        return [pb.KV(key=key, value=value) for key, value in flow.attributes.items()]
    return [pb.KV(key=key, value=value) for key, value in _selected(flow, loaded_maps)]


def _selected(flow: Flow, loaded_maps: Iterable[str]) -> Iterator[tuple[str, pb.Value]]:
    """Singleton Attributes, plus the AttributeMap instances that were loaded.

    Persistence names cannot contain '/', so a key with one is a map instance
    (``name/instance``); the SDK refuses to read instances that were not loaded, so
    they are left out and tasks stay small. ``name/`` loads every instance of a map.
    """
    loaded = set(loaded_maps)
    for key, value in flow.attributes.items():
        slash = key.find("/")
        if slash < 0 or key in loaded or key[: slash + 1] in loaded:
            yield key, value


def _add_attributes(repeated: Any, flow: Flow, loaded_maps: Iterable[str]) -> None:
    """Append the Attributes a method loads to a request's ``attributes`` in place.

    Building each ``KV`` on its own and passing the list to the request's
    constructor copies every value twice; with a long conversation loaded that was
    most of the engine's time per Step (tens of ms at a thousand messages).
    """
    add = repeated.add
    for key, value in _selected(flow, loaded_maps):
        add(key=key, value=value)


def _add_channels(
    request: pb.InvokeWaitForMethodRequest
    | pb.InvokeExecuteMethodRequest
    | pb.InvokeWorkerRPCRequest,
    flow: Flow,
    names: Iterable[str],
    map_instances: Iterable[str],
) -> None:
    """Every non-empty Channel's size, and the messages of the Channels the method loads."""
    for name, queue in flow.channels.items():
        if queue:
            request.channel_infos[name].size = len(queue)
    for name, values in _loaded_messages(flow, names, map_instances).items():
        request.loaded_channel_messages[name].CopyFrom(values)


def _loaded_messages(
    flow: Flow, names: Iterable[str], map_instances: Iterable[str]
) -> dict[str, pb.ChannelValues]:
    """The messages of the named Channels and ChannelMap instances (a trailing '/' loads
    every instance of the map)."""
    wanted: list[str] = list(names)
    for instance in map_instances:
        if instance.endswith("/"):
            wanted.extend(name for name in flow.channels if name.startswith(instance))
        else:
            wanted.append(instance)
    loaded: dict[str, pb.ChannelValues] = {}
    for name in wanted:
        values = pb.ChannelValues()
        for message in flow.channels.get(name, ()):
            values.messages.add(
                channel_name=name, value=message.value, message_id=message.message_id
            )
        loaded[name] = values
    return loaded


def wait_for_request(flow: Flow, step: StepExec) -> pb.InvokeWaitForMethodRequest:
    """The task of a Step's wait_for attempt."""
    options = step.options
    request = pb.InvokeWaitForMethodRequest(
        context=_context(flow, step),
        flow_type=flow.flow_type,
        step_type=step.step_type,
        step_input=step.step_input,
        loaded_attribute_map_instances=options.wait_for_load_attribute_map_instances,
        loaded_channel_names=options.wait_for_load_channel_names,
        loaded_channel_map_instances=options.wait_for_load_channel_map_instances,
    )
    _add_attributes(request.attributes, flow, options.wait_for_load_attribute_map_instances)
    _add_channels(
        request,
        flow,
        options.wait_for_load_channel_names,
        options.wait_for_load_channel_map_instances,
    )
    return request


def execute_request(flow: Flow, step: StepExec) -> pb.InvokeExecuteMethodRequest:
    """The task of a Step's execute attempt."""
    options = step.options
    request = pb.InvokeExecuteMethodRequest(
        context=_context(flow, step),
        flow_type=flow.flow_type,
        step_type=step.step_type,
        step_input=step.step_input,
        step_exe_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
        condition_results=step.results or pb.ConditionResults(),
        loaded_attribute_map_instances=options.execute_load_attribute_map_instances,
        loaded_channel_names=options.execute_load_channel_names,
        loaded_channel_map_instances=options.execute_load_channel_map_instances,
    )
    _add_attributes(request.attributes, flow, options.execute_load_attribute_map_instances)
    _add_channels(
        request,
        flow,
        options.execute_load_channel_names,
        options.execute_load_channel_map_instances,
    )
    if step.step_type == TIMEOUT_HANDLER_STEP_TYPE:
        request.ClearField("step_input")  # the SDK requires the handler's input absent
    return request


def rpc_request(flow: Flow, request: pb.InvokeRPCRequest) -> pb.InvokeWorkerRPCRequest:
    """The task of an RPC call, with the state its caller asked to load."""
    rpc = pb.InvokeWorkerRPCRequest(
        context=pb.Context(
            flow_id=flow.flow_id,
            run_id=flow.run_id,
            flow_started_timestamp=int(flow.start_time),
        ),
        flow_type=flow.flow_type,
        rpc_name=request.rpc_name,
        input=request.input if request.HasField("input") else null(),
        loaded_attribute_map_instances=request.load_attribute_map_instances,
        loaded_channel_names=request.load_channel_names,
        loaded_channel_map_instances=request.load_channel_map_instances,
    )
    _add_attributes(rpc.attributes, flow, request.load_attribute_map_instances)
    _add_channels(rpc, flow, request.load_channel_names, request.load_channel_map_instances)
    return rpc
