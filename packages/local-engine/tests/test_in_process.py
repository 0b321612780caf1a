"""The in-process channel: the real SDK and the real engine, and gRPC's behaviour kept.

Most tests run the same thing over loopback gRPC and over the in-process channel and
expect the same outcome, so the channel cannot drift from what gRPC does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import async_app
import grpc
import pytest
from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    DexServiceError,
    FlowAlreadyStartedError,
    FlowNotFoundError,
    FlowStatus,
    Registry,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from dex.worker_options import PullWorkerOptions
from google.protobuf import empty_pb2

from dex_agents._sdk_patches import route_in_process_channels
from dex_local_engine import EngineLimits, EngineServer
from dex_local_engine.in_process import InProcessChannel, InProcessServer, server_at

TRANSPORTS = ["grpc", "in-process"]
KIB = 1024


@pytest.fixture(autouse=True)
def routed() -> None:
    # Process-wide, but only addresses an EngineServer(in_process=True) registered change.
    assert route_in_process_channels() is True
    assert route_in_process_channels() is True  # idempotent


@contextlib.asynccontextmanager
async def serving(transport: str, limits: EngineLimits | None = None) -> AsyncIterator[str]:
    server = EngineServer(
        ":memory:", "127.0.0.1", 0, limits=limits, in_process=transport == "in-process"
    )
    address = await server.start()
    try:
        yield address
    finally:
        await server.stop(0.5)
    assert server_at(address) is None


@contextlib.asynccontextmanager
async def app(address: str, cache_dir: str) -> AsyncIterator[tuple[AsyncClient, Any]]:
    """An AsyncClient and a running pull AsyncWorker for the async test Flow."""
    flows = async_app.flows()
    registry = Registry(flows, allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
    worker = AsyncWorker(
        registry,
        cache,
        WorkerOptions(server_address=address, pull=PullWorkerOptions(max_concurrent_tasks=4)),
    )
    running = asyncio.create_task(worker.start())
    client = AsyncClient(
        registry,
        cache,
        ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
    )
    try:
        await worker.wait_pull_registered(30)
        yield client, flows[0]
    finally:
        await client.close()
        await worker.stop()
        await asyncio.wait_for(running, 30)
        cache.close()


def channel_of(client: AsyncClient) -> Any:
    return vars(client)["_channel"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_worker_runs_flows_with_steps_and_rpcs(transport: str, cache_dir: str) -> None:
    async with serving(transport) as address, app(address, cache_dir) as (client, flow):
        assert isinstance(channel_of(client), InProcessChannel) == (transport == "in-process")
        await client.start_flow(flow, "flow-1", "in")
        assert await client.invoke_rpc(flow.send, "flow-1", "hello") == "HELLO"
        result = await client.wait_for_flow("flow-1")
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "in:['hello']"
        note = await client.read_stream("flow-1", flow.notes)
        assert (note.value, note.source) == ("executing", "#AsyncWaiter-1")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_engine_errors_reach_the_sdk_as_the_same_typed_errors(
    transport: str, cache_dir: str
) -> None:
    async with serving(transport) as address, app(address, cache_dir) as (client, flow):
        with pytest.raises(FlowNotFoundError) as missing:
            await client.describe_flow("no-such-flow")
        assert "no-such-flow" in missing.value.detail
        await client.start_flow(flow, "twice", "in")
        with pytest.raises(FlowAlreadyStartedError) as twice:
            await client.start_flow(flow, "twice", "in")
        assert twice.value.code is grpc.StatusCode.ALREADY_EXISTS


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_oversized_requests_are_refused_as_grpc_refuses_them(
    transport: str, cache_dir: str
) -> None:
    limits = EngineLimits(max_value_bytes=64 * KIB, max_request_bytes=128 * KIB)
    async with serving(transport, limits) as address, app(address, cache_dir) as (client, flow):
        with pytest.raises(DexServiceError) as too_large:  # over max_request_bytes
            await client.write_stream("f", flow.notes, "test", "x" * (200 * KIB))
        assert too_large.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(DexServiceError) as value_too_large:  # over max_value_bytes
            await client.write_stream("f", flow.notes, "test", "x" * (100 * KIB))
        assert value_too_large.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "max_value_bytes" in value_too_large.value.detail


def read_stream_request() -> pb.ReadStreamRequest:
    return pb.ReadStreamRequest(
        flow_id="quiet",
        flow_type="AsyncFlow",
        stream_name="notes",
        wait_time_seconds=30,
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_deadline_ends_a_long_poll_with_deadline_exceeded(transport: str) -> None:
    async with serving(transport) as address:
        server = server_at(address)
        channel: Any = InProcessChannel(server) if server else grpc.aio.insecure_channel(address)
        async with channel:
            stub = pb_grpc.FlowServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as late:
                await stub.ReadStream(read_stream_request(), timeout=0.2)
            assert late.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert server is None or not server.active  # the handler was ended


async def test_cancelling_a_long_poll_cancels_the_engine_handler() -> None:
    async with serving("in-process") as address:
        server = server_at(address)
        assert server is not None
        stub = pb_grpc.FlowServiceStub(InProcessChannel(server))
        call = stub.ReadStream(read_stream_request())
        await asyncio.sleep(0)  # let the handler start its long poll
        (served,) = server.active
        assert not served.cancelled()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert served.task is not None
        await asyncio.wait({served.task})
        assert served.cancelled()
        assert served.task.cancelled()
        assert call.cancelled()
        assert not server.active


async def test_closing_the_channel_cancels_its_active_calls(cache_dir: str) -> None:
    async with serving("in-process") as address:
        server = server_at(address)
        assert server is not None
        channel = InProcessChannel(server)
        poll = pb_grpc.FlowServiceStub(channel).ReadStream(read_stream_request())
        stream = pb_grpc.WorkerTaskServiceStub(channel).PollWorkerTask()
        await stream.write(
            pb.PollWorkerTaskRequest(
                register=pb.PollWorkerTaskRegister(
                    queue="AsyncFlow", app_worker_id="w", flow_types=["AsyncFlow"]
                )
            )
        )
        registered = await stream.read()
        assert registered.WhichOneof("frame") == "registered"
        handlers = [call.task for call in server.active]
        assert len(handlers) == 2
        await channel.close()
        with pytest.raises(asyncio.CancelledError):
            await poll
        with pytest.raises(asyncio.CancelledError):
            await stream.read()
        await asyncio.wait([task for task in handlers if task is not None])
        assert not server.active
        with pytest.raises(grpc.aio.UsageError):
            pb_grpc.FlowServiceStub(channel).HealthCheck(empty_pb2.Empty())


async def test_calls_pass_the_engines_interceptors_bearer_token_included() -> None:
    server = EngineServer(":memory:", "127.0.0.1", 0, token="s3cret", in_process=True)
    address = await server.start()
    try:
        in_process = server_at(address)
        assert in_process is not None
        stub = pb_grpc.FlowServiceStub(InProcessChannel(in_process))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.HealthCheck(empty_pb2.Empty())
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        answer = await stub.HealthCheck(
            empty_pb2.Empty(), metadata=(("authorization", "Bearer s3cret"),)
        )
        assert answer.condition == "OK"
    finally:
        await server.stop()


async def test_a_channel_by_address_follows_the_engine_across_a_restart() -> None:
    with socket.socket() as probe:  # a free port, for two engines one after the other
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    first = EngineServer(":memory:", "127.0.0.1", port, in_process=True)
    address = await first.start()
    async with InProcessChannel(address=address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        assert (await stub.HealthCheck(empty_pb2.Empty())).condition == "OK"
        assert channel.target() is server_at(address) is not None
        await first.stop()
        with pytest.raises(grpc.aio.AioRpcError) as nobody:  # over gRPC: nothing listens
            await stub.HealthCheck(empty_pb2.Empty(), timeout=5)
        assert nobody.value.code() is grpc.StatusCode.UNAVAILABLE
        second = EngineServer(":memory:", "127.0.0.1", port, in_process=True)
        assert await second.start() == address
        try:
            assert channel.target() is server_at(address) is not None
            assert (await stub.HealthCheck(empty_pb2.Empty())).condition == "OK"
        finally:
            await second.stop()


async def test_unimplemented_kinds_of_calls_fail_clearly_when_called() -> None:
    async with serving("in-process") as address:
        server = server_at(address)
        assert server is not None
        stub = pb_grpc.WorkerServiceStub(InProcessChannel(server))  # builds unary-stream calls
        with pytest.raises(NotImplementedError, match="unary-stream"):
            stub.InvokeExecuteMethod(pb.InvokeExecuteMethodRequest())


async def test_a_client_on_another_thread_and_loop_reaches_the_engine(cache_dir: str) -> None:
    async with serving("in-process") as address, app(address, cache_dir) as (client, flow):
        await client.start_flow(flow, "from-here", "in")

        async def elsewhere() -> tuple[bool, str]:
            # A second Client and Worker on this thread's own loop, through the same address.
            async with app(address, cache_dir) as (other, other_flow):
                await other.start_flow(other_flow, "from-there", "x")
                answer = await other.invoke_rpc(other_flow.send, "from-here", "hi")
                return isinstance(channel_of(other), InProcessChannel), answer

        routed_there, answer = await asyncio.to_thread(asyncio.run, elsewhere())
        assert routed_there
        assert answer == "HI"
        assert (await client.wait_for_flow("from-here")).status is FlowStatus.COMPLETED


# --- the channel against gRPC's own server, on handlers written for the comparison ---------

FLAG: contextvars.ContextVar[str] = contextvars.ContextVar("flag", default="unset")
MIB = 1024 * 1024


async def echo(request: bytes, context: Any) -> bytes:
    return request


async def boom(request: bytes, context: Any) -> bytes:
    raise ValueError("boom")


async def refuse(request: bytes, context: Any) -> bytes:
    await context.abort(grpc.StatusCode.NOT_FOUND, "gone", trailing_metadata=(("x-why", "test"),))
    raise AssertionError("abort returned")


async def big(request: bytes, context: Any) -> bytes:
    return b"x" * (5 * MIB)


async def flag(request: bytes, context: Any) -> bytes:
    seen = FLAG.get()
    FLAG.set("set by the handler")
    return seen.encode()


HANDLERS = grpc.method_handlers_generic_handler(
    "t.T",
    {
        name: grpc.unary_unary_rpc_method_handler(function)
        for name, function in {
            "Echo": echo,
            "Boom": boom,
            "Refuse": refuse,
            "Big": big,
            "Flag": flag,
        }.items()
    },
)


@contextlib.asynccontextmanager
async def channel_to(transport: str) -> AsyncIterator[Any]:
    if transport == "in-process":
        server = InProcessServer([HANDLERS], max_receive_bytes=4 * MIB, max_send_bytes=2**31 - 1)
        async with InProcessChannel(server) as channel:
            yield channel
        return
    real: Any = grpc.aio.server()
    real.add_generic_rpc_handlers((HANDLERS,))
    port = real.add_insecure_port("127.0.0.1:0")
    await real.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await real.stop(None)


async def outcome(channel: Any, method: str, request: bytes = b"hi") -> tuple[Any, ...]:
    try:
        response = await channel.unary_unary(f"/t.T/{method}")(request)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details(), dict(error.trailing_metadata() or ()).get("x-why")
    return grpc.StatusCode.OK, response


async def test_statuses_match_grpcs_own_server() -> None:
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for transport in TRANSPORTS:
        async with channel_to(transport) as channel:
            seen[transport] = [
                await outcome(channel, "Echo"),
                await outcome(channel, "Boom"),
                await outcome(channel, "Refuse"),
                await outcome(channel, "Missing"),
                await outcome(channel, "Echo", b"x" * (5 * MIB)),
                (await outcome(channel, "Big"))[0],
            ]
    assert seen["in-process"] == seen["grpc"]
    assert seen["grpc"][1][:2] == (grpc.StatusCode.UNKNOWN, "Unexpected <class 'ValueError'>: boom")
    assert seen["grpc"][2] == (grpc.StatusCode.NOT_FOUND, "gone", "test")
    assert seen["grpc"][4][0] is seen["grpc"][5] is grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_no_context_variable_crosses_the_call_either_way() -> None:
    async with channel_to("in-process") as channel:
        FLAG.set("set by the caller")
        assert await outcome(channel, "Flag") == (grpc.StatusCode.OK, b"unset")
        assert FLAG.get() == "set by the caller"

        def from_a_thread() -> tuple[Any, ...]:
            FLAG.set("set by the thread")
            return asyncio.run(outcome(channel, "Flag"))

        assert await asyncio.to_thread(from_a_thread) == (grpc.StatusCode.OK, b"unset")


def test_a_call_when_the_engine_loop_is_not_running_is_refused_not_left_waiting() -> None:
    loop = asyncio.new_event_loop()
    try:
        server = loop.run_until_complete(_server())
        refused = asyncio.run(outcome(InProcessChannel(server), "Echo"))
        assert refused[:1] == (grpc.StatusCode.UNAVAILABLE,)
    finally:
        loop.close()


async def _server() -> InProcessServer:
    return InProcessServer([HANDLERS], max_receive_bytes=MIB, max_send_bytes=MIB)


async def test_waiting_frames_commit_together_bare_heartbeats_not_at_all(cache_dir: str) -> None:
    """A Step's Stream writes and its final frame, already waiting when the engine reads
    them, commit in one transaction; each still takes effect. A heartbeat without a
    new value writes nothing."""
    server = EngineServer(":memory:", "127.0.0.1", 0, in_process=True)
    address = await server.start()
    flow = async_app.flows()[0]
    registry = Registry([flow], allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
    options = ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True))
    client = AsyncClient(registry, cache, options)
    in_process = server_at(address)
    assert in_process is not None
    channel = InProcessChannel(in_process)
    store = vars(server)["_engine"].store
    commits = 0
    transaction = store.transaction

    @contextlib.contextmanager
    def counted() -> Any:
        nonlocal commits
        commits += store._depth == 0
        with transaction():
            yield

    worker_stream = channel.stream_stream(
        "/dex.WorkerTaskService/PollWorkerTask",
        request_serializer=pb.PollWorkerTaskRequest.SerializeToString,
        response_deserializer=pb.PollWorkerTaskResponse.FromString,
    )()
    try:
        flow_type = next(iter(registry._registered_flows))  # pyright: ignore[reportPrivateUsage]
        await worker_stream.write(
            pb.PollWorkerTaskRequest(
                register=pb.PollWorkerTaskRegister(
                    queue=flow_type, app_worker_id="raw-worker", flow_types=[flow_type]
                )
            )
        )
        assert (await worker_stream.read()).WhichOneof("frame") == "registered"
        await client.start_flow(flow, "flow-1", "in")
        task = (await worker_stream.read()).task
        assert task.task_id

        def frame(**output: Any) -> pb.PollWorkerTaskRequest:
            """A frame of the task: its ``wait_for`` output, or a ``worker_error``."""
            if "worker_error" not in output:
                output = {"wait_for": pb.InvokeWaitForMethodOutput(**output)}
            return pb.PollWorkerTaskRequest(
                task_frame=pb.PollWorkerTaskFrame(task_id=task.task_id, **output)
            )

        def write(text: str) -> pb.PollWorkerTaskRequest:
            value = pb.Value(string_value=text)
            return frame(stream_write=pb.StepStreamWrite(stream_name="notes", value=value))

        def beat(value: pb.Value | None) -> pb.PollWorkerTaskRequest:
            return frame(heartbeat=pb.StepMethodHeartbeat(value=value))

        failed = frame(worker_error=pb.WorkerErrorResponse(detail="raw worker gives up"))
        store.transaction = counted
        await worker_stream.write(beat(None))
        for _ in range(5):
            await asyncio.sleep(0)  # the engine reads it
        assert commits == 0
        # Nothing suspends between these writes, so all of them wait for the engine.
        checkpoint = pb.Value(string_value="page 2")
        for frame in (write("one"), write("two"), beat(checkpoint), failed):
            await worker_stream.write(frame)
        first = await client.read_stream("flow-1", flow.notes, "", timedelta(seconds=5))
        second = await client.read_stream("flow-1", flow.notes, first.resume_token)
        assert (first.value, second.value) == ("one", "two")
        assert commits == 1
        # The rest took effect too: the Step's retry comes with the checkpoint.
        retry = (await asyncio.wait_for(worker_stream.read(), 30)).task
        assert retry.task_id
        assert retry.task_id != task.task_id
        assert retry.wait_for.context.last_heartbeat_value == checkpoint
    finally:
        store.transaction = transaction
        worker_stream.cancel()
        await client.close()
        await server.stop(0.5)
        cache.close()
