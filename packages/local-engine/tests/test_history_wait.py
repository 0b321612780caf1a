"""WaitForHistoryEvent: a long poll for the next event of a run, through raw gRPC."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
import travel_app as app
from conftest import running_flows
from dex import Client, StepExecutionId, WaitForStepCompletionOptions
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        running.client.travel = running.flows[0]  # type: ignore[attr-defined]
        yield running.client


@pytest.fixture
def stub(engine: LocalEngine) -> Iterator[pb_grpc.FlowServiceStub]:
    with grpc.insecure_channel(engine.address) as channel:
        yield pb_grpc.FlowServiceStub(channel)


def _last_event_id(stub: pb_grpc.FlowServiceStub, flow_id: str) -> int:
    events = stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id=flow_id)).events
    return events[-1].event_id


def test_a_wait_returns_when_the_next_event_is_recorded(
    client: Client, stub: pb_grpc.FlowServiceStub
) -> None:
    flow: app.TravelFlow = client.travel  # type: ignore[attr-defined]
    client.start_flow(flow, "hw", "in")
    client.wait_for_step_completion(
        "hw", StepExecutionId("Prepare", 1), WaitForStepCompletionOptions()
    )
    run_id = client.describe_flow("hw").run_id
    known = _last_event_id(stub, "hw")
    present = stub.WaitForHistoryEvent(
        pb.WaitForHistoryEventRequest(flow_id="hw", run_id=run_id, next_internal_event_id=1)
    )
    assert (present.event_available, present.available_internal_event_id) == (True, 1)
    # The run is waiting (Gate-1 for a message): the next event, Gate-1's wait or the
    # RPC that publishes the message, ends the long poll.
    pending = stub.WaitForHistoryEvent.future(
        pb.WaitForHistoryEventRequest(flow_id="hw", run_id=run_id, next_internal_event_id=known + 1)
    )
    client.invoke_rpc(flow.open, "hw", "a")
    answer = pending.result(timeout=30)
    assert answer.event_available
    assert answer.available_internal_event_id == known + 1
    assert answer.flow_status == pb.FLOW_STATUS_RUNNING


def test_a_closed_run_without_the_event_says_so(
    client: Client, stub: pb_grpc.FlowServiceStub
) -> None:
    flow: app.TravelFlow = client.travel  # type: ignore[attr-defined]
    client.start_flow(flow, "hc", "in")
    client.invoke_rpc(flow.open, "hc", "a")
    client.invoke_rpc(flow.open, "hc", "b")
    client.wait_for_flow("hc")
    run_id = client.describe_flow("hc").run_id
    beyond = _last_event_id(stub, "hc") + 1
    answer = stub.WaitForHistoryEvent(
        pb.WaitForHistoryEventRequest(flow_id="hc", run_id=run_id, next_internal_event_id=beyond)
    )
    assert not answer.event_available
    assert answer.flow_status == pb.FLOW_STATUS_COMPLETED


@pytest.mark.parametrize(
    "request_fields",
    [
        {"run_id": "r", "next_internal_event_id": 1},
        {"flow_id": "hw", "next_internal_event_id": 1},
        {"flow_id": "hw", "run_id": "r"},
    ],
)
def test_a_request_needs_flow_run_and_a_positive_event_id(
    stub: pb_grpc.FlowServiceStub, request_fields: dict[str, object]
) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        stub.WaitForHistoryEvent(pb.WaitForHistoryEventRequest(**request_fields))  # type: ignore[arg-type]
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "positive next event ID" in str(raised.value.details())
