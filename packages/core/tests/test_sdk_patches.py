"""dex_agents._sdk_patches: every use of the SDK's private parts, checked against the pinned SDK.

Each patch applies to the release it was written for and leaves any other alone; the one
private read (a Step's protobuf Context) is checked on a real Step, so an SDK upgrade
that moves it fails here first.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from importlib.metadata import version

import dex
from dex import AsyncContext, RetryPolicy, Step, StepDecision, StepList, StepOptions
from dex.dexpb import dex_pb2 as pb

from dex_agents import AgentHost
from dex_agents._attempt_progress import (
    StepAttemptProgress,
    attempt_progress_of,
    recovery_attempt_progress,
)
from dex_agents._sdk_patches import PATCHED_SDK_VERSION, step_context_metadata
from dex_local_engine.attempt_progress import with_attempt_progress


def _run(script: str) -> subprocess.CompletedProcess[str]:
    # A child process each: the patches are process-wide.
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_gate_is_the_release_the_core_pins() -> None:
    assert version("dex-python-sdk") == PATCHED_SDK_VERSION


MEMOIZE_SCRIPT = """
import importlib.metadata
import dex._pull_worker as pull_worker
import dex._server_protocol as server_protocol
from dex_agents._sdk_patches import memoize_sdk_version

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


def test_the_memoized_version_lookup_reads_the_metadata_once() -> None:
    done = _run(MEMOIZE_SCRIPT)
    assert done.stdout.strip() == "ok", done.stderr


PATCHES_SCRIPT = """
import dex._pull_worker as pull_worker
import dex.async_client as async_client
from dex_agents._sdk_patches import (
    keep_finished_pull_streams,
    quiet_pull_worker_logs,
    route_in_process_channels,
    running_pull_tasks,
    track_running_pull_tasks,
)

assert running_pull_tasks(object()) is None  # not tracked yet
assert track_running_pull_tasks() is True
assert track_running_pull_tasks() is True  # idempotent
assert getattr(pull_worker.PullStream, "_dex_agents_tracks_tasks")
assert running_pull_tasks(object()) is None  # not a pull Worker
assert quiet_pull_worker_logs() is True
assert quiet_pull_worker_logs() is True  # idempotent: one filter
import logging
assert len(logging.getLogger("dex._pull_worker").filters) == 1
assert keep_finished_pull_streams() is True
assert keep_finished_pull_streams() is True  # idempotent
assert route_in_process_channels() is True
assert route_in_process_channels() is True
assert getattr(async_client.async_channel, "_dex_local_engine_in_process")
assert getattr(pull_worker.PullStream, "_dex_agents_keeps_streams")
print("ok")
"""


def test_the_pull_stream_and_channel_patches_apply_to_the_pinned_release() -> None:
    done = _run(PATCHES_SCRIPT)
    assert done.stdout.strip() == "ok", done.stderr


OTHER_RELEASE_SCRIPT = """
import dex._pull_worker as pull_worker
import dex._server_protocol as server_protocol
import dex.async_client as async_client
from dex.dexpb import dex_pb2 as pb
from dex_agents._sdk_patches import (
    keep_finished_pull_streams,
    memoize_sdk_version,
    route_in_process_channels,
    quiet_pull_worker_logs,
    step_context_metadata,
    track_running_pull_tasks,
)

before = (
    async_client.async_channel,
    pull_worker.outbound_worker_task_channel,
    pull_worker.PullStream.try_retire,
    pull_worker.PullStream._start_task,
)
server_protocol.sdk_version = lambda: "9.9.9"
assert route_in_process_channels() is False
assert keep_finished_pull_streams() is False
assert track_running_pull_tasks() is False
assert quiet_pull_worker_logs() is False
after = (
    async_client.async_channel,
    pull_worker.outbound_worker_task_channel,
    pull_worker.PullStream.try_retire,
    pull_worker.PullStream._start_task,
)
assert after == before

class Context:
    _metadata = pb.Context()

assert step_context_metadata(Context()) is None
print("ok")
"""


def test_another_sdk_release_is_left_alone_and_the_log_says_why() -> None:
    done = _run(OTHER_RELEASE_SCRIPT)
    assert done.stdout.strip() == "ok", done.stderr
    for what in (
        "routing channels in process",
        "keeping pull streams",
        "tracking running tasks",
        "quieting reconnect logs",
        "reading the attempt progress of recovery errors",
    ):
        assert f"not {what}: written for dex-python-sdk 1.23.0, found 9.9.9" in done.stderr


MEMOIZE_OTHER_RELEASE_SCRIPT = """
import dex._server_protocol as server_protocol
from dex_agents._sdk_patches import memoize_sdk_version

server_protocol.version = lambda name: "9.9.9"
assert memoize_sdk_version() is False
assert getattr(server_protocol.sdk_version, "cache_info", None) is None
print("ok")
"""


def test_memoizing_leaves_another_release_alone() -> None:
    done = _run(MEMOIZE_OTHER_RELEASE_SCRIPT)
    assert done.stdout.strip() == "ok", done.stderr
    message = "not memoizing the SDK version: written for dex-python-sdk 1.23.0, found 9.9.9"
    assert message in done.stderr


def test_the_core_decodes_the_attempt_progress_the_engine_writes() -> None:
    info = pb.RecoveryErrorInfo(detail="no Worker took the task", error_type="MethodTimeout")
    assert attempt_progress_of(info) is None
    for progress in StepAttemptProgress:
        assert attempt_progress_of(with_attempt_progress(info, progress)) is progress  # type: ignore[arg-type]


class _Fails(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        once = RetryPolicy(maximum_attempts=1, initial_interval=timedelta(seconds=1))
        return StepOptions(execute_retry=once).on_execute_failure_proceed_to(_ReadsProgress)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        raise RuntimeError(f"broken {input}")


class _ReadsProgress(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        metadata = step_context_metadata(context)
        return dex.graceful_complete(
            f"{type(metadata).__name__}|{recovery_attempt_progress(context)}"
        )


class _ProgressFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList[str].start_step(_Fails()).other_steps(_ReadsProgress())


async def test_a_failure_route_reads_the_attempt_progress_from_a_real_step_context() -> None:
    flow = _ProgressFlow()
    async with AgentHost(flow) as host:
        await host.dex_client.start_flow(flow, "progress-1", "payload")
        result = await host.dex_client.wait_for_flow("progress-1")
    assert result.completions[0].decode(str) == "Context|not_completed"
