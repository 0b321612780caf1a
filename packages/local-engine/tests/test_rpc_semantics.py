"""RPC rules Dex applications rely on, through the real SDK and a real pull Worker.

- An RPC sees the writes of ASYNC Step methods its Flow is running (Dex Server runs
  them inside the workflow task, and the query behind an RPC waits for that task),
  whether a start, an RPC or a publish started them; it does not wait for SYNC
  methods, which Dex runs as separate activities.
- A read-only RPC works on a closed Flow (it is a query), also one racing the
  close; one that writes is refused.
- A Flow configuration naming an Attribute Store the engine lacks is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import grpc
import pytest
import rpc_semantics_app as app
from conftest import RunningFlows, running_flows
from dex import (
    AttributeMatch,
    FlowConfig,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowStatus,
    StartFlowOptions,
    WaitForAttributeOptions,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def apps(engine: LocalEngine, cache_dir: str) -> Iterator[RunningFlows]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        yield running
        app.RELEASE.set()  # never leave a Step blocked behind the Worker's stop


def test_rpc_right_after_start_sees_the_start_steps_writes(apps: RunningFlows) -> None:
    flow = apps.flow(app.MarkFlow)
    for attempt in range(20):
        flow_id = f"mark-{attempt}"
        apps.client.start_flow(flow, flow_id, f"value-{attempt}")
        assert apps.client.invoke_rpc(flow.read, flow_id) == f"value-{attempt}"


def test_rpc_right_after_an_rpc_sees_the_steps_it_started(apps: RunningFlows) -> None:
    flow = apps.flow(app.MarkFlow)
    apps.client.start_flow(flow, "mark-rpc", "first")
    assert apps.client.invoke_rpc(flow.read, "mark-rpc") == "first"
    for attempt in range(5):
        apps.client.invoke_rpc(flow.restart, "mark-rpc", f"again-{attempt}")
        assert apps.client.invoke_rpc(flow.read, "mark-rpc") == f"again-{attempt}"


def test_rpc_right_after_a_publish_sees_the_step_it_unblocked(
    apps: RunningFlows, engine: LocalEngine
) -> None:
    flow = apps.flow(app.PokeFlow)
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        for attempt in range(10):
            flow_id = f"poke-{attempt}"
            apps.client.start_flow(flow, flow_id, "")
            stub.PublishToChannel(
                pb.PublishToChannelRequest(
                    flow_id=flow_id,
                    messages=[
                        pb.ChannelMessage(
                            channel_name="poke", value=pb.Value(string_value=f"p{attempt}")
                        )
                    ],
                )
            )
            assert apps.client.invoke_rpc(flow.read, flow_id) == f"p{attempt}"


def test_read_only_rpc_racing_the_close_reads_the_final_state(apps: RunningFlows) -> None:
    # No wait for the close: each RPC lands while the Flow is running, closing or closed.
    flow = apps.flow(app.ClosedFlow)
    for attempt in range(20):
        flow_id = f"racing-{attempt}"
        apps.client.start_flow(flow, flow_id, f"final-{attempt}")
        assert apps.client.invoke_rpc(flow.read, flow_id) == f"final-{attempt}"


def test_rpc_does_not_wait_for_a_sync_step(apps: RunningFlows) -> None:
    app.RELEASE.clear()
    flow = apps.flow(app.SyncMarkFlow)
    apps.client.start_flow(flow, "sync-mark", "late")
    assert apps.client.invoke_rpc(flow.read, "sync-mark") == ""
    app.RELEASE.set()
    assert (
        apps.client.wait_for_attribute_match(
            "sync-mark",
            flow.mark,
            AttributeMatch.equal_to("late"),
            WaitForAttributeOptions(request_timeout=timedelta(seconds=30)),
        )
        == "late"
    )


def test_read_only_rpc_works_on_a_closed_flow_and_a_writing_one_is_refused(
    apps: RunningFlows,
) -> None:
    flow = apps.flow(app.ClosedFlow)
    apps.client.start_flow(flow, "closed", "done")
    assert apps.client.wait_for_flow("closed").status is FlowStatus.COMPLETED
    assert apps.client.invoke_rpc(flow.read, "closed") == "done"
    with pytest.raises(FlowNotActiveOrNotFoundError):
        apps.client.invoke_rpc(flow.write, "closed", "changed")
    assert apps.client.invoke_rpc(flow.read, "closed") == "done"


def test_unknown_attribute_store_is_refused_and_nothing_starts(apps: RunningFlows) -> None:
    flow = apps.flow(app.ClosedFlow)
    options = StartFlowOptions(config_override=FlowConfig(attribute_store_names=["warehouse"]))
    with pytest.raises(Exception, match="unknown Attribute Store 'warehouse'"):
        apps.client.start_flow(flow, "stored", "x", options)
    with pytest.raises(FlowNotFoundError):
        apps.client.describe_flow("stored")
