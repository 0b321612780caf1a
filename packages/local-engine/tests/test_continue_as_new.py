"""Continue-as-new by threshold and by TriggerContinueAsNew, through the real SDK."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
import reset_app as app
from conftest import running_flows
from dex import (
    Client,
    DexServiceError,
    FlowConfig,
    FlowStatus,
    StartFlowOptions,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        running.client.go = running.flows[0]  # type: ignore[attr-defined]
        yield running.client


def _new_run(client: Client, flow_id: str, old_run: str) -> str:
    """Poll the summary until the run changes (nothing else announces it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run_id = client.describe_flow(flow_id).run_id
        if run_id != old_run:
            return run_id
        time.sleep(0.02)
    raise AssertionError(f"{flow_id} did not continue as new")


def _history(engine: LocalEngine, flow_id: str) -> list[pb.FlowHistoryEvent]:
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        return list(stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id=flow_id)).events)


def test_threshold_moves_the_flow_to_new_runs_that_keep_its_state(
    client: Client, engine: LocalEngine
) -> None:
    flow: app.GoFlow = client.go  # type: ignore[attr-defined]
    first = client.start_flow(
        flow,
        "can",
        "in",
        StartFlowOptions(config_override=FlowConfig(continue_as_new_threshold=1)),
    )
    second = _new_run(client, "can", first)  # after the wait_for result
    start = _history(engine, "can")[0].flow_started_or_continued
    assert start.continued_start.previous_run_id in (first, second)
    assert start.flow_execution_id.run_id == client.describe_flow("can").run_id
    client.invoke_rpc(flow.release, "can", "kept")  # the waiting Step moved along
    result = client.wait_for_flow("can")
    assert result.single_output(str) == "in:kept"
    assert client.describe_flow("can").run_id != first


def test_trigger_continues_a_running_flow_now(client: Client, engine: LocalEngine) -> None:
    flow: app.GoFlow = client.go  # type: ignore[attr-defined]
    first = client.start_flow(flow, "trig", "in")
    client.invoke_rpc(flow.read, "trig")  # the start Step has run its wait_for
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        stub.TriggerContinueAsNew(pb.TriggerContinueAsNewRequest(flow_id="trig"))
        with pytest.raises(grpc.RpcError) as stale:
            stub.TriggerContinueAsNew(pb.TriggerContinueAsNewRequest(flow_id="trig", run_id=first))
    assert stale.value.code() == grpc.StatusCode.NOT_FOUND
    info = client.describe_flow("trig")
    assert info.run_id != first
    assert info.status is FlowStatus.RUNNING
    (start,) = _history(engine, "trig")
    assert start.flow_started_or_continued.continued_start.previous_run_id == first
    client.invoke_rpc(flow.release, "trig", "after")
    assert client.wait_for_flow("trig").single_output(str) == "in:after"


def test_negative_threshold_is_refused(client: Client) -> None:
    flow: app.GoFlow = client.go  # type: ignore[attr-defined]
    with pytest.raises(DexServiceError, match="continue_as_new_threshold must be >= 0"):
        client.start_flow(
            flow,
            "bad",
            "in",
            StartFlowOptions(config_override=FlowConfig(continue_as_new_threshold=-1)),
        )
