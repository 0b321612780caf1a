"""Listening Workers: the engine calls WorkerService at the Flow's Worker address."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from conftest import App
from dex import (
    Client,
    ClientOptions,
    FlowStatus,
    Worker,
    WorkerInvocationError,
    WorkerOptions,
)

from dex_local_engine import LocalEngine


@pytest.fixture
def listening_client(app: App, engine: LocalEngine) -> Iterator[Client]:
    worker = Worker(
        app.registry,
        app.cache,
        WorkerOptions(server_address=engine.address, bind_address="127.0.0.1:0"),
    )
    thread = threading.Thread(target=worker.start, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while worker.worker_target.address.endswith(":0") and time.monotonic() < deadline:
        time.sleep(0.05)
    client = Client(
        app.registry,
        app.cache,
        ClientOptions(server_address=engine.address, worker_target=worker.worker_target),
    )
    yield client
    worker.stop()
    thread.join(30)


def test_listening_worker_runs_steps_and_rpcs(app: App, listening_client: Client) -> None:
    client = listening_client
    client.start_flow(app.agent, "listen-1", "hey")
    assert client.invoke_rpc(app.agent.bump, "listen-1", 2) == 2
    result = client.wait_for_flow("listen-1")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "hey|msgs=['bumped-2']|counter=2"
    client.start_flow(app.agent, "listen-2", "hey")
    with pytest.raises(WorkerInvocationError) as failure:
        client.invoke_rpc(app.agent.boom, "listen-2", "bad")
    assert failure.value.worker_error_detail == "bad!"
