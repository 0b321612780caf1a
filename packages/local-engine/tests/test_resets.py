"""ResetFlow (time travel) to the beginning, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import grpc
import pytest
import reset_app as app
from conftest import running_flows
from dex import (
    Client,
    FlowStatus,
    LongPollTimeoutError,
    TimeTravelOptions,
    TimeTravelType,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        running.client.go = running.flows[0]  # type: ignore[attr-defined]
        yield running.client


def _go(client: Client) -> app.GoFlow:
    return client.go  # type: ignore[attr-defined,no-any-return]


def _released(client: Client, flow_id: str) -> app.GoFlow:
    flow = _go(client)
    client.start_flow(flow, flow_id, "in")
    client.invoke_rpc(flow.release, flow_id, "first")
    assert client.wait_for_flow(flow_id).single_output(str) == "in:first"
    return flow


def test_reset_reapplies_the_rpc_and_forks_the_history(client: Client, engine: LocalEngine) -> None:
    _released(client, "fork")
    first_run = client.describe_flow("fork").run_id
    run_id = client.time_travel("fork", TimeTravelOptions(TimeTravelType.BEGINNING, reason="r"))
    assert run_id != first_run
    assert client.wait_for_flow("fork").single_output(str) == "in:first"
    assert client.describe_flow("fork").run_id == run_id
    with grpc.insecure_channel(engine.address) as channel:
        events = (
            pb_grpc.FlowServiceStub(channel)
            .GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id="fork"))
            .events
        )
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[:3] == ["flow_started_or_continued", "time_travel_fork", "rpc_execution_completed"]
    assert events[1].time_travel_fork.previous_run_id == first_run
    assert kinds[-1] == "flow_closed"


def test_reset_can_skip_the_writes_and_then_waits_again(client: Client) -> None:
    flow = _released(client, "skip")
    client.time_travel(
        "skip", TimeTravelOptions(TimeTravelType.BEGINNING, skip_writes_reapply=True)
    )
    with pytest.raises(LongPollTimeoutError):
        client.wait_for_flow("skip", timeout=timedelta(seconds=1))
    assert client.invoke_rpc(flow.read, "skip") == ""
    client.invoke_rpc(flow.release, "skip", "second")
    assert client.wait_for_flow("skip").single_output(str) == "in:second"


def test_reset_of_a_running_flow_terminates_that_run(client: Client) -> None:
    flow = _go(client)
    client.start_flow(flow, "live", "in")
    first_run = client.describe_flow("live").run_id
    client.time_travel("live", TimeTravelOptions(TimeTravelType.BEGINNING, reason="again"))
    info = client.describe_flow("live")
    assert info.run_id != first_run
    assert info.status is FlowStatus.RUNNING
    client.invoke_rpc(flow.release, "live", "after")
    assert client.wait_for_flow("live").single_output(str) == "in:after"
