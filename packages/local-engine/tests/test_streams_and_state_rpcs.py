"""Streams through the SDK, the byte budget, and the state RPCs older SDKs call."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from conftest import App, ThreadWorker
from dex import FlowStatus, LongPollTimeoutError
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from google.protobuf import empty_pb2

from dex_local_engine import LocalEngine
from dex_local_engine._store.store import Store
from dex_local_engine._store.streams import StreamStore


def test_client_stream_writes_pages_and_resume_tokens(app: App) -> None:
    client = app.client
    for i in range(5):
        client.write_stream("no-flow-needed", app.agent.events, "test", f"m{i}")
    first = client.read_stream("no-flow-needed", app.agent.events)
    assert first.value == "m0"
    assert first.source == "test"
    second = client.read_stream("no-flow-needed", app.agent.events, first.resume_token)
    assert second.value == "m1"
    page = client.list_stream_messages("no-flow-needed", app.agent.events, 2)
    assert [m.value for m in page.messages] == ["m4", "m3"]
    older = client.list_stream_messages(
        "no-flow-needed", app.agent.events, 10, page.next_page_token
    )
    assert [m.value for m in older.messages] == ["m2", "m1", "m0"]
    assert older.next_page_token == ""
    last = client.list_stream_messages("no-flow-needed", app.agent.events, 1).messages[0]
    with pytest.raises(LongPollTimeoutError):
        client.read_stream(
            "no-flow-needed", app.agent.events, last.resume_token, timeout=timedelta(seconds=1)
        )


async def test_stream_budget_trims_oldest_across_flows_of_a_type(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    streams = StreamStore(store)
    value = pb.Value(string_value="x" * 100)
    size = len(value.SerializeToString())
    for flow_id in ("a", "b", "a", "b"):
        streams.write(
            flow_type="T", stream="s", flow_id=flow_id, value=value, capacity=3 * size, source=""
        )
    # Four messages over a three-message budget: a's first message went.
    assert streams.first_after("T", "s", "a", "").resume_token == "2"
    assert streams.first_after("T", "s", "b", "").resume_token == "1"
    reloaded = StreamStore(store)
    reloaded.load()
    assert reloaded.first_after("T", "s", "a", "").resume_token == "2"
    found = await reloaded.read("T", "s", "b", "2", 0.05)
    assert found is None
    store.close()


def test_state_rpcs_and_unimplemented_names(
    app: App, worker: ThreadWorker, engine: LocalEngine
) -> None:
    app.client.start_flow(app.agent, "state-1", "s")
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        stub.SetAttributes(
            pb.SetAttributesRequest(
                flow_id="state-1",
                attributes=[pb.AttributeWrite(key="counter", value=pb.Value(int_value=41))],
            )
        )
        got = stub.GetAttributes(pb.GetAttributesRequest(flow_id="state-1", keys=["counter", "x"]))
        assert [(kv.key, kv.value.int_value) for kv in got.attributes] == [("counter", 41)]
        # The waiting Step takes the published message, reads the Attribute and completes.
        stub.PublishToChannel(
            pb.PublishToChannelRequest(
                flow_id="state-1",
                messages=[
                    pb.ChannelMessage(channel_name="inbox", value=pb.Value(string_value="pub"))
                ],
            )
        )
        result = app.client.wait_for_flow("state-1")
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "s|msgs=['pub']|counter=41"
        with pytest.raises(grpc.RpcError) as failure:
            stub.UpdateFlowConfig(pb.UpdateFlowConfigRequest(flow_id="x"))
        assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "UpdateFlowConfig" in (failure.value.details() or "")
        info = stub.GetServerInfo(empty_pb2.Empty())
        assert (info.minimum_supported_protocol_version, info.current_protocol_version) == (1, 3)


def test_reading_a_stream_needs_its_names(engine: LocalEngine) -> None:
    async def read() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = pb_grpc.FlowServiceStub(channel)
            try:
                await stub.ReadStream(pb.ReadStreamRequest(flow_id="f"))
            except grpc.aio.AioRpcError as error:
                return error.code()
        return grpc.StatusCode.OK

    assert asyncio.run(read()) == grpc.StatusCode.INVALID_ARGUMENT
