"""Size limits: refused where the input enters, never accepted and then stuck.

A Flow whose Step would load more than a Worker can receive fails that Step with a
clear error, at once, and a Flow beside it on the same Worker carries on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import dex
import grpc
import pytest
import size_app
from conftest import ThreadWorker
from dex import BlobCacheConfig, Client, ClientOptions, Registry, WorkerTarget, open_blob_cache
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import EngineLimits, LocalEngine
from dex_local_engine._rules.limits import (
    DEFAULT_MAX_VALUE_BYTES,
    SDK_MAX_RECEIVE_BYTES,
    oversized_value,
)

MIB = 1024 * 1024
FLOW = size_app.SizeFlow


class SizeApp:
    def __init__(self, address: str, cache_dir: str) -> None:
        self.flows = size_app.flows()
        self.flow: size_app.SizeFlow = self.flows[0]  # type: ignore[assignment]
        self.registry = Registry(self.flows)
        self.cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=50_000_000))
        self.client = Client(
            self.registry,
            self.cache,
            ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
        )


@pytest.fixture
def sized(engine: LocalEngine, cache_dir: str) -> Iterator[SizeApp]:
    made = SizeApp(engine.address, cache_dir)
    worker = ThreadWorker(made.registry, made.cache, engine.address).start()
    yield made
    worker.stop()
    made.cache.close()


def test_a_value_over_the_limit_is_refused_where_it_enters(sized: SizeApp) -> None:
    client, flow = sized.client, sized.flow
    client.start_flow(flow, "entry", "a")
    with pytest.raises(dex.DexServiceError, match="max_value_bytes"):
        client.invoke_rpc(flow.echo, "entry", "x" * (DEFAULT_MAX_VALUE_BYTES + 1))
    with pytest.raises(dex.DexServiceError, match="max_value_bytes"):
        client.start_flow(flow, "too-big-input", "x" * (DEFAULT_MAX_VALUE_BYTES + 1))
    # A value the Worker writes past the limit fails that RPC, and nothing was stored.
    with pytest.raises(Exception, match="max_value_bytes"):
        client.invoke_rpc(flow.put, "entry", DEFAULT_MAX_VALUE_BYTES + 1)
    # Just under the limit passes, and the Flow still works.
    assert client.invoke_rpc(flow.echo, "entry", "x" * (DEFAULT_MAX_VALUE_BYTES - 64)) > 0
    assert client.invoke_rpc(flow.put, "entry", 10) == 10
    assert client.invoke_rpc(flow.release, "entry")
    assert client.wait_for_flow("entry").single_output(str) == "a:10"


def test_a_task_no_worker_can_receive_fails_its_step_and_spares_the_other_flows(
    sized: SizeApp,
) -> None:
    client, flow = sized.client, sized.flow
    client.start_flow(flow, "heavy", "h")
    client.start_flow(flow, "light", "l")
    for _ in range(3):  # each value passes; together they pass what a Worker receives
        assert client.invoke_rpc(flow.put, "heavy", int(1.5 * MIB)) > 0
    assert client.invoke_rpc(flow.release, "heavy")
    heavy = client.wait_for_flow("heavy")
    assert heavy.status == dex.FlowStatus.FAILED
    assert "max_task_bytes" in (heavy.error_message or "")
    assert "LoadAll" in (heavy.error_message or "")
    # The other Flow on the same Worker is untouched.
    assert client.invoke_rpc(flow.put, "light", 100) == 100
    assert client.invoke_rpc(flow.release, "light")
    assert client.wait_for_flow("light").single_output(str) == "l:100"


def test_limits_are_checked_when_configured() -> None:
    with pytest.raises(ValueError, match="positive"):
        EngineLimits(max_value_bytes=0)
    with pytest.raises(ValueError, match="below max_task_bytes"):
        EngineLimits(max_value_bytes=SDK_MAX_RECEIVE_BYTES)
    with pytest.raises(ValueError, match="exceed max_request_bytes"):
        EngineLimits(max_value_bytes=3 * MIB, max_request_bytes=2 * MIB)


def test_oversized_value_names_the_field() -> None:
    request = pb.InvokeRPCRequest(flow_id="f", input=pb.Value(string_value="x" * 100))
    assert oversized_value(request, 200) is None
    found = oversized_value(request, 50)
    assert found is not None
    assert found[0] == "input"
    assert found[1] > 100


def test_a_worker_gets_no_more_streams_than_the_limit() -> None:
    limits = EngineLimits(max_concurrent_streams_per_worker=2)
    release = threading.Event()

    def frames() -> Iterator[pb.PollWorkerTaskRequest]:
        yield pb.PollWorkerTaskRequest(
            register=pb.PollWorkerTaskRegister(queue="Q", app_worker_id="w-1", flow_types=["Q"])
        )
        release.wait(30)

    with LocalEngine(limits=limits) as engine, grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.WorkerTaskServiceStub(channel)
        calls = [stub.PollWorkerTask(frames()) for _ in range(2)]
        for call in calls:
            assert next(call).WhichOneof("frame") == "registered"
        with pytest.raises(grpc.RpcError) as refused:
            next(stub.PollWorkerTask(frames()))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert "max_concurrent_streams_per_worker" in str(refused.value.details())  # type: ignore[attr-defined]
        release.set()
        for call in calls:
            call.cancel()
