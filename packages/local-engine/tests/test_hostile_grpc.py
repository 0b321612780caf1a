"""Hostile input on the engine's gRPC surface (property-based): malformed protobufs,
random well-formed requests, bad resume tokens, unknown Flow types, oversized values.

Every call ends with a status code, never UNKNOWN (an unexpected exception in a
handler), never a hang, and the engine keeps serving afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from google.protobuf import empty_pb2, message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dex_local_engine import EngineLimits, LocalEngine

FLOW_METHODS = list(pb.DESCRIPTOR.services_by_name["FlowService"].methods)
LONG_POLLS = {"ReadStream", "WaitForFlow", "WaitForStepCompletion", "WaitForAttribute"}
CALL_TIMEOUT = 10.0
HOSTILE = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SMALL_LIMITS = EngineLimits(max_value_bytes=4096)


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    with LocalEngine(limits=SMALL_LIMITS) as engine, grpc.insecure_channel(engine.address) as ch:
        yield ch


def _raw_call(channel: grpc.Channel, method: Any, payload: bytes) -> grpc.StatusCode:
    path = f"/dex.FlowService/{method.name}"
    call = channel.unary_unary(
        path,
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )
    # A long poll on random input may wait for its whole cap: bound it short.
    timeout = 1.0 if method.name in LONG_POLLS else CALL_TIMEOUT
    try:
        call(payload, timeout=timeout)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[attr-defined]
    return grpc.StatusCode.OK


def _assert_answered(method: Any, code: grpc.StatusCode) -> None:
    assert code != grpc.StatusCode.UNKNOWN, f"{method.name} raised an unexpected error"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        assert method.name in LONG_POLLS, f"{method.name} did not answer"


def _healthy(channel: grpc.Channel) -> None:
    pb_grpc.FlowServiceStub(channel).HealthCheck(empty_pb2.Empty(), timeout=CALL_TIMEOUT)


@HOSTILE
@given(method=st.sampled_from(FLOW_METHODS), payload=st.binary(max_size=300))
def test_malformed_bytes_get_a_status_on_every_method(
    channel: grpc.Channel, method: Any, payload: bytes
) -> None:
    _assert_answered(method, _raw_call(channel, method, payload))
    _healthy(channel)


flow_ids = st.sampled_from(["", "f", "known", "known/child", "x" * 300, "\u00e9\u0000"])
names = st.sampled_from(["", "T", "Unknown", "StartAgentSession", "a/b", "\x00"])
values = st.one_of(
    st.builds(pb.Value, string_value=st.text(max_size=50)),
    st.builds(
        pb.Value,
        obj_value=st.builds(
            pb.EncodedObject,
            encoding=st.sampled_from(["", "json", "unknown/enc"]),
            payload=st.binary(max_size=50),
        ),
    ),
    st.builds(pb.Value, int_value=st.integers(-(2**63), 2**63 - 1)),
    st.just(pb.Value(string_value="x" * (SMALL_LIMITS.max_value_bytes + 1))),
    st.just(pb.Value(internal_blob_id_for_obj_value="blob-that-does-not-exist")),
    st.just(pb.Value()),
)
tokens = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "0", "-1", "99999999999999999999999", "1:2:3", "\x00"]),
)
requests = st.one_of(
    st.builds(
        pb.StartFlowRequest,
        flow_id=flow_ids,
        flow_type=names,
        start_step_type=names,
        step_input=values,
        flow_timeout_seconds=st.integers(-5, 2**31 - 1),
    ).map(lambda r: ("StartFlow", r)),
    st.builds(
        pb.InvokeRPCRequest,
        flow_id=flow_ids,
        rpc_name=names,
        input=values,
        timeout_seconds=st.integers(0, 2),
    ).map(lambda r: ("InvokeRPC", r)),
    st.builds(
        pb.WriteStreamRequest,
        flow_id=flow_ids,
        flow_type=names,
        stream_name=names,
        value=values,
        stream_capacity_bytes=st.integers(-1, 10_000),
    ).map(lambda r: ("WriteStream", r)),
    st.builds(
        pb.ReadStreamRequest,
        flow_id=flow_ids,
        flow_type=names,
        stream_name=names,
        resume_token=tokens,
        wait_time_seconds=st.just(1),
    ).map(lambda r: ("ReadStream", r)),
    st.builds(
        pb.ListStreamMessagesRequest,
        flow_id=flow_ids,
        flow_type=names,
        stream_name=names,
        before_page_token=tokens,
        page_size=st.integers(-5, 5000),
    ).map(lambda r: ("ListStreamMessages", r)),
    st.builds(pb.GetFlowSummaryRequest, flow_id=flow_ids).map(lambda r: ("GetFlowSummary", r)),
    st.builds(
        pb.SkipTimerRequest,
        flow_id=flow_ids,
        step_execution_id=st.sampled_from(["", "S-1", "S-x", "-1", "S--2"]),
        timer_condition_id=names,
    ).map(lambda r: ("SkipTimer", r)),
)


@pytest.fixture(scope="module")
def known_flow(channel: grpc.Channel) -> str:
    pb_grpc.FlowServiceStub(channel).StartFlow(
        pb.StartFlowRequest(flow_id="known", flow_type="T"), timeout=CALL_TIMEOUT
    )
    return "known"


@HOSTILE
@given(request=requests)
def test_random_requests_get_a_clear_answer(
    channel: grpc.Channel, known_flow: str, request: tuple[str, Any]
) -> None:
    del known_flow
    name, message = request
    method = pb.DESCRIPTOR.services_by_name["FlowService"].methods_by_name[name]
    code = _raw_call(channel, method, message.SerializeToString())
    _assert_answered(method, code)
    for value in _values_of(message):
        if value.ByteSize() > SMALL_LIMITS.max_value_bytes:
            assert code == grpc.StatusCode.INVALID_ARGUMENT
    _healthy(channel)


def _values_of(message: Any) -> list[pb.Value]:
    return [
        value
        for field, value in message.ListFields()
        if field.message_type is not None and field.message_type.full_name == "dex.Value"
    ]


@HOSTILE
@given(frames=st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_malformed_worker_stream_frames_end_only_that_stream(
    channel: grpc.Channel, frames: list[bytes]
) -> None:
    call = channel.stream_stream(
        "/dex.WorkerTaskService/PollWorkerTask",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )
    code = grpc.StatusCode.OK
    try:
        for _ in call(iter(frames), timeout=2.0):
            pass
    except grpc.RpcError as error:
        code = error.code()  # type: ignore[attr-defined]
    assert code != grpc.StatusCode.UNKNOWN
    _healthy(channel)


def _fields_of(descriptor: Any, depth: int) -> st.SearchStrategy[Any]:
    """Any well-formed message of ``descriptor``: each field unset or a hostile value."""
    if descriptor.full_name == "dex.Value":
        return values
    fields = {
        field.name: _field_values(field, depth)
        for field in descriptor.fields
        if depth > 0 or field.message_type is None
    }
    message_class = _message_class(descriptor)
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: _build(message_class, kw))


def _build(message_class: Any, fields: dict[str, Any]) -> Any:
    message = message_class()
    for name, value in fields.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        if field.is_repeated and field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                continue  # maps: left empty (their keys and values are covered elsewhere)
            getattr(message, name).extend(value)
        elif field.is_repeated:
            getattr(message, name).extend(value)
        elif field.message_type is not None:
            getattr(message, name).CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


def _field_values(field: Any, depth: int) -> st.SearchStrategy[Any]:
    types = field.__class__
    if field.message_type is not None:
        single = _fields_of(field.message_type, depth - 1)
    elif field.enum_type is not None:
        single = st.sampled_from([value.number for value in field.enum_type.values])
    elif field.type == types.TYPE_STRING:
        single = st.one_of(flow_ids, names, tokens)
    elif field.type == types.TYPE_BYTES:
        single = st.binary(max_size=50)
    elif field.type == types.TYPE_BOOL:
        single = st.booleans()
    elif field.type in (types.TYPE_DOUBLE, types.TYPE_FLOAT):
        single = st.floats(allow_nan=False, allow_infinity=False, width=32)
    elif field.type in (types.TYPE_UINT32, types.TYPE_FIXED32):
        single = st.integers(0, 2**32 - 1)
    elif field.type in (types.TYPE_UINT64, types.TYPE_FIXED64):
        single = st.integers(0, 2**64 - 1)
    elif field.type in (types.TYPE_INT32, types.TYPE_SINT32, types.TYPE_SFIXED32):
        single = st.integers(-(2**31), 2**31 - 1)
    else:
        single = st.integers(-(2**63), 2**63 - 1)
    return st.lists(single, max_size=3) if field.is_repeated else single


def _message_class(descriptor: Any) -> Any:
    return message_factory.GetMessageClass(descriptor)


@HOSTILE
@given(data=st.data(), method=st.sampled_from(FLOW_METHODS))
def test_well_formed_hostile_requests_on_every_method_get_a_clear_answer(
    channel: grpc.Channel, known_flow: str, data: st.DataObject, method: Any
) -> None:
    del known_flow
    message = data.draw(_fields_of(method.input_type, depth=2))
    code = _raw_call(channel, method, message.SerializeToString())
    _assert_answered(method, code)
    _healthy(channel)
