"""The opt-in SDK version memoization: applied once, and Workers still register."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib.metadata, sys
import dex._pull_worker as pull_worker
import dex._server_protocol as server_protocol
from dex_local_engine.sdk_patches import memoize_sdk_version

calls = []
real = importlib.metadata.version
server_protocol.version = lambda name: calls.append(name) or real(name)
assert memoize_sdk_version() is True
assert memoize_sdk_version() is True  # idempotent
assert pull_worker.sdk_version is server_protocol.sdk_version
versions = {pull_worker.sdk_version() for _ in range(50)}
assert versions == {real("dex-python-sdk")}, versions
assert calls == ["dex-python-sdk"], calls
print("ok")
"""


def test_memoized_lookup_reads_the_metadata_once() -> None:
    # A child process: the patch is process-wide and must not leak into other tests.
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


OTHER_RELEASE_SCRIPT = """
import dex._pull_worker as pull_worker
import dex._server_protocol as server_protocol
import dex.async_client as async_client
from dex_local_engine.sdk_patches import route_in_process_channels

before = (async_client.async_channel, pull_worker.outbound_worker_task_channel)
server_protocol.sdk_version = lambda: "9.9.9"
assert route_in_process_channels() is False
assert (async_client.async_channel, pull_worker.outbound_worker_task_channel) == before
print("ok")
"""


def test_in_process_routing_leaves_another_sdk_release_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_RELEASE_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr
    assert "written for dex-python-sdk 1.23.0, found 9.9.9" in done.stderr
