"""StopFlow's reason, as Dex reports it: a terminate's reason is the error message of
the history's close event (WaitForFlow's result has none); a fail's reason is the
error message of both; a cancel has none."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
import reset_app as app
from conftest import running_flows
from dex import Client, FlowStatus, StopFlowOptions, StopType
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        running.client.go = running.flows[0]  # type: ignore[attr-defined]
        yield running.client


def _close_event(engine: LocalEngine, flow_id: str) -> pb.FlowClosedHistoryEvent:
    with grpc.insecure_channel(engine.address) as channel:
        events = (
            pb_grpc.FlowServiceStub(channel)
            .GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id=flow_id))
            .events
        )
    assert events[-1].WhichOneof("payload") == "flow_closed"
    return events[-1].flow_closed


@pytest.mark.parametrize(
    ("stop_type", "status", "event_message", "result_message"),
    [
        (StopType.TERMINATE, FlowStatus.TERMINATED, "customer left", ""),
        (StopType.FAIL, FlowStatus.FAILED, "customer left", "customer left"),
        (StopType.CANCEL, FlowStatus.CANCELED, "", ""),
    ],
)
def test_the_stop_reason_is_reported_as_dex_does(
    client: Client,
    engine: LocalEngine,
    stop_type: StopType,
    status: FlowStatus,
    event_message: str,
    result_message: str,
) -> None:
    flow_id = f"stop-{stop_type.value}"
    client.start_flow(client.go, flow_id, "in")  # type: ignore[attr-defined]
    client.stop_flow(flow_id, StopFlowOptions(type=stop_type, reason="customer left"))
    result = client.wait_for_flow(flow_id)
    assert result.status is status
    assert (result.error_message or "") == result_message
    assert _close_event(engine, flow_id).error_message == event_message
