"""Bearer-token authentication: every service, Worker streams included, refuses a call
without the engine's token; the SDK's credential gets through; no open listening by accident."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import size_app
from dex import (
    BlobCacheConfig,
    Client,
    ClientOptions,
    FileCredential,
    Registry,
    Worker,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.worker_options import PullWorkerOptions

from dex_local_engine import EngineStartError, LocalEngine, read_token
from dex_local_engine.cli import main

TOKEN = "engine-token-4f9c"


class FixedCredential:
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


@pytest.fixture(scope="module")
def guarded() -> Iterator[LocalEngine]:
    with LocalEngine(token=TOKEN) as engine:
        yield engine


def _methods(service: str) -> list[Any]:
    return list(pb.DESCRIPTOR.services_by_name[service].methods)


def _call(channel: grpc.Channel, service: str, method: Any, metadata: Any) -> grpc.StatusCode:
    path = f"/{pb.DESCRIPTOR.package}.{service}/{method.name}"
    request = method.input_type._concrete_class()  # an empty request of the right type
    response_type = method.output_type._concrete_class
    kwargs: dict[str, Any] = {
        "request_serializer": type(request).SerializeToString,
        "response_deserializer": response_type.FromString,
    }
    try:
        if method.client_streaming and method.server_streaming:
            call = channel.stream_stream(path, **kwargs)(iter([request]), metadata=metadata)
            next(iter(call))
        elif method.server_streaming:
            next(iter(channel.unary_stream(path, **kwargs)(request, metadata=metadata)))
        elif method.client_streaming:
            channel.stream_unary(path, **kwargs)(iter([request]), metadata=metadata)
        else:
            channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=10)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[attr-defined]
    return grpc.StatusCode.OK


@pytest.mark.parametrize("service", ["FlowService", "WorkerTaskService"])
@pytest.mark.parametrize(
    "metadata",
    [None, [("authorization", "Bearer wrong")], [("authorization", TOKEN)]],
    ids=["no token", "wrong token", "no Bearer prefix"],
)
def test_every_method_refuses_a_call_without_the_token(
    guarded: LocalEngine, service: str, metadata: Any
) -> None:
    with grpc.insecure_channel(guarded.address) as channel:
        codes = {m.name: _call(channel, service, m, metadata) for m in _methods(service)}
    assert codes
    assert set(codes.values()) == {grpc.StatusCode.UNAUTHENTICATED}, codes


def test_the_right_token_gets_through(guarded: LocalEngine) -> None:
    with grpc.insecure_channel(guarded.address) as channel:
        code = _call(
            channel,
            "FlowService",
            pb.DESCRIPTOR.services_by_name["FlowService"].methods_by_name["HealthCheck"],
            [("authorization", f"Bearer {TOKEN}")],
        )
    assert code == grpc.StatusCode.OK


def _client(registry: Registry, cache: Any, address: str, credential: Any) -> Client:
    options = ClientOptions(
        server_address=address, worker_target=WorkerTarget(pull=True), credential=credential
    )
    return Client(registry, cache, options)


def test_sdk_client_and_worker_run_a_flow_with_the_credential(
    guarded: LocalEngine, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    flows = size_app.flows()
    registry = Registry(flows)
    cache = open_blob_cache(BlobCacheConfig(directory=str(tmp_path), max_bytes=10_000_000))
    credential = FileCredential(token_file)
    client = _client(registry, cache, guarded.address, credential)
    worker = Worker(
        registry,
        cache,
        WorkerOptions(
            server_address=guarded.address, pull=PullWorkerOptions(), credential=credential
        ),
    )
    thread = threading.Thread(target=worker.start, daemon=True)
    thread.start()
    try:
        worker.wait_pull_registered(30)
        flow: size_app.SizeFlow = flows[0]  # type: ignore[assignment]
        client.start_flow(flow, "authorized", "a")
        assert client.invoke_rpc(flow.put, "authorized", 3) == 3
        assert client.invoke_rpc(flow.release, "authorized")
        assert client.wait_for_flow("authorized").single_output(str) == "a:3"

        stranger = _client(registry, cache, guarded.address, FixedCredential("not-the-token"))
        with pytest.raises(Exception, match="bearer token"):
            stranger.invoke_rpc(flow.put, "authorized", 3)
    finally:
        worker.stop()
        thread.join(30)
        cache.close()


def test_a_worker_without_the_token_cannot_start(guarded: LocalEngine, tmp_path: Path) -> None:
    registry = Registry(size_app.flows())
    cache = open_blob_cache(BlobCacheConfig(directory=str(tmp_path), max_bytes=10_000_000))
    try:
        with pytest.raises(RuntimeError):  # its start-up calls are refused
            Worker(
                registry,
                cache,
                WorkerOptions(server_address=guarded.address, pull=PullWorkerOptions()),
            ).start()
    finally:
        cache.close()


def test_no_open_listening_on_the_network_by_accident() -> None:
    with pytest.raises(EngineStartError, match="without a token"):
        LocalEngine(host="0.0.0.0").start()
    with LocalEngine(host="0.0.0.0", allow_insecure=True) as engine:
        assert engine.address.startswith("0.0.0.0:")
    with LocalEngine(host="0.0.0.0", token=TOKEN) as engine:
        assert engine.address
    with pytest.raises(EngineStartError, match="empty"):
        LocalEngine(token="  ").start()


def test_the_token_comes_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEX_LOCAL_ENGINE_TOKEN", raising=False)
    assert read_token() is None
    monkeypatch.setenv("DEX_LOCAL_ENGINE_TOKEN", " from-env ")
    assert read_token() == "from-env"
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert read_token(token_file) == "from-file"
    token_file.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_token(token_file)


def test_serve_refuses_a_network_address_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEX_LOCAL_ENGINE_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--insecure-no-auth" in capsys.readouterr().err
    assert main(["serve", "--token-file", "/nonexistent/token", "--port", "0"]) == 2
    assert "nonexistent" in capsys.readouterr().err
