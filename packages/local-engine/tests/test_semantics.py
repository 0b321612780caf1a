"""Engine rules, each driven through the real SDK and a real pull Worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import semantics_app as s
from conftest import ThreadWorker
from dex import (
    AttributeMatch,
    BlobCacheConfig,
    ChannelMessageNotFoundError,
    Client,
    ClientOptions,
    FlowErrorType,
    FlowStatus,
    LongPollTimeoutError,
    Registry,
    RpcLockConflictError,
    StepExecutionId,
    TimerId,
    WaitForAttributeOptions,
    WaitForStepCompletionOptions,
    Worker,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from dex.worker_options import PullWorkerOptions

from dex_local_engine import LocalEngine


class Sem:
    def __init__(self, address: str, cache_dir: str) -> None:
        self.flows = s.flows()
        self.registry = Registry(self.flows)
        self.cache = open_blob_cache(BlobCacheConfig(directory=cache_dir, max_bytes=10_000_000))
        self.client = Client(
            self.registry,
            self.cache,
            ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
        )

    def flow(self, kind: type[Any]) -> Any:
        return next(flow for flow in self.flows if isinstance(flow, kind))


@pytest.fixture
def sem(engine: LocalEngine, cache_dir: str) -> Iterator[Sem]:
    made = Sem(engine.address, cache_dir)
    worker = ThreadWorker(made.registry, made.cache, engine.address).start()
    yield made
    worker.stop()
    made.cache.close()


def _history(engine: LocalEngine, flow_id: str) -> list[pb.FlowHistoryEvent]:
    import grpc

    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        response = stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id=flow_id))
    return list(response.events)


def test_zero_timer_skip_timer_and_early_skip(sem: Sem) -> None:
    client = sem.client
    client.start_flow(sem.flow(s.TimerFlow), "timers", "t")
    # LongTimer-1 waits for an hour; skip its second timer by ID.
    _wait_until(lambda: _skip(client, "LongTimer", TimerId(condition_id="two-hours")))
    # SlowWaitTimer-1 has not started waiting yet: the skip is remembered.
    client.skip_timer("timers", StepExecutionId("SlowWaitTimer", 1), TimerId(condition_index=0))
    result = client.wait_for_flow("timers")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == (
        "zero-fired=True|long-fired=[False, True]|early-skip=True"
    )


def _skip(client: Client, step_type: str, timer: TimerId) -> bool:
    client.wait_for_step_completion(
        "timers",
        StepExecutionId("ZeroTimer", 1),
        WaitForStepCompletionOptions(request_timeout=timedelta(seconds=10)),
    )
    client.skip_timer("timers", StepExecutionId(step_type, 1), timer)
    return True


def _wait_until(check: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_cancellation_by_type_from_execute_and_rpc(sem: Sem, engine: LocalEngine) -> None:
    client = sem.client
    control = sem.flow(s.ControlFlow)
    client.start_flow(control, "cancel-1", "x")
    assert (
        client.wait_for_attribute_match(
            "cancel-1",
            control.status,
            AttributeMatch.equal_to("fanned-out"),
            WaitForAttributeOptions(request_timeout=timedelta(seconds=10)),
        )
        == "fanned-out"
    )
    client.invoke_rpc(control.trigger, "cancel-1")
    client.wait_for_attribute_match(
        "cancel-1",
        control.status,
        AttributeMatch.equal_to("finished"),
        WaitForAttributeOptions(request_timeout=timedelta(seconds=10)),
    )
    client.wait_for_step_completion(
        "cancel-1",
        StepExecutionId("Idle", 2),
        WaitForStepCompletionOptions(request_timeout=timedelta(seconds=10)),
    )
    # Everything dead-ended or was canceled: the Flow keeps running.
    with pytest.raises(LongPollTimeoutError):
        client.wait_for_flow("cancel-1", timeout=timedelta(seconds=1))
    assert client.describe_flow("cancel-1").status is FlowStatus.RUNNING
    events = _history(engine, "cancel-1")
    executed = [
        e.step_execute_completed.context.step_execution_id
        for e in events
        if e.HasField("step_execute_completed")
    ]
    assert "Idle-1" not in executed
    assert "Idle-2" not in executed
    assert "Canceler-1" in executed

    client.start_flow(control, "cancel-2", "x")
    client.wait_for_attribute_match(
        "cancel-2",
        control.status,
        AttributeMatch.equal_to("fanned-out"),
        WaitForAttributeOptions(request_timeout=timedelta(seconds=10)),
    )
    assert client.invoke_rpc(control.cancel_idle, "cancel-2") == "ok"
    client.wait_for_attribute_match(
        "cancel-2",
        control.status,
        AttributeMatch.equal_to("finished"),
        WaitForAttributeOptions(request_timeout=timedelta(seconds=10)),
    )
    events = _history(engine, "cancel-2")
    finisher = [
        e.step_execute_completed.context
        for e in events
        if e.HasField("step_execute_completed")
        and e.step_execute_completed.context.step_type == "Finisher"
    ]
    assert [c.from_step_execution_id for c in finisher] == ["__rpc/cancel_idle"]


def test_execute_failure_route_gets_same_input_and_recovery_error(sem: Sem) -> None:
    client = sem.client
    client.start_flow(sem.flow(s.FailureFlow), "route", "route")
    result = client.wait_for_flow("route")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == (
        "input=payload|from=AlwaysFails-1|builtins.RuntimeError|broken payload on attempt 2|"
        "not_completed"
    )


def test_wait_for_failure_can_proceed_to_execute(sem: Sem) -> None:
    sem.client.start_flow(sem.flow(s.FailureFlow), "proceed", "proceed")
    result = sem.client.wait_for_flow("proceed")
    assert result.completions[0].decode(str) == "failed=True|wait_for broke"


def test_movement_options_override_the_steps_own(sem: Sem, engine: LocalEngine) -> None:
    # As on Dex Server: the wait_for runs twice and fails, the failure is recorded once,
    # with its final attempt, and execute runs instead of the Flow failing.
    sem.client.start_flow(sem.flow(s.FailureFlow), "override", "override")
    result = sem.client.wait_for_flow("override")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "failed=True|wait_for broke on attempt 2"
    events = _history(engine, "override")
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == [
        "flow_started_or_continued",
        "step_execute_completed",
        "step_wait_for_failed",
        "step_execute_completed",
        "flow_closed",
    ]
    failed = events[2].step_wait_for_failed
    assert failed.context.step_execution_id == "StrictWaitFor-1"
    assert failed.context.final_attempt == 2


def test_close_decisions(sem: Sem) -> None:
    client = sem.client
    failure = sem.flow(s.FailureFlow)
    client.start_flow(failure, "ff", "force-fail")
    result = client.wait_for_flow("ff")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "the Step gave up"

    client.start_flow(failure, "fc", "force-complete")
    result = client.wait_for_flow("fc")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "forced"

    client.start_flow(failure, "de", "dead-end")
    with pytest.raises(LongPollTimeoutError):
        client.wait_for_flow("de", timeout=timedelta(seconds=1))

    client.start_flow(failure, "unhandled", "unhandled")
    result = client.wait_for_flow("unhandled")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "nope" in (result.error_message or "")


def test_attempt_that_never_reached_a_worker_is_not_started(
    engine: LocalEngine, cache_dir: str
) -> None:
    made = Sem(engine.address, cache_dir)
    # Two slots with one reserved for RPCs: one Step at a time.
    worker = Worker(
        made.registry,
        made.cache,
        WorkerOptions(
            server_address=engine.address,
            pull=PullWorkerOptions(max_concurrent_tasks=2, reserved_rpc_tasks=1),
        ),
    )
    thread = threading.Thread(target=worker.start, daemon=True)
    thread.start()
    try:
        worker.wait_pull_registered(30)
        starve = made.flow(s.StarveFlow)
        made.client.start_flow(starve, "starve", "x")
        made.client.wait_for_step_completion(
            "starve",
            StepExecutionId("StarveStart", 1),
            WaitForStepCompletionOptions(request_timeout=timedelta(seconds=10)),
        )
        time.sleep(0.5)  # Hog is running
        made.client.invoke_rpc(starve.starve, "starve")
        result = made.client.wait_for_flow("starve")
        assert result.status is FlowStatus.COMPLETED
        output = result.completions[0].decode(str)
        assert output.startswith("input=s|from=Starved-1|dex_local_engine.MethodTimeout|")
        assert output.endswith("|not_started")
    finally:
        worker.stop()
        thread.join(30)
        made.cache.close()


def test_method_timeout_cancels_the_task(sem: Sem) -> None:
    s.TimeoutFlow.saw_cancel.clear()
    sem.client.start_flow(sem.flow(s.TimeoutFlow), "mt", "method")
    result = sem.client.wait_for_flow("mt")
    output = result.completions[0].decode(str)
    assert "from=Sleeper-1|dex_local_engine.MethodTimeout|" in output
    assert output.endswith("|not_completed")
    _wait_until(lambda: s.TimeoutFlow.saw_cancel == [True])


def test_heartbeat_timeout_fails_the_attempt(
    monkeypatch: pytest.MonkeyPatch, cache_dir: str
) -> None:
    # Dex raises explicit heartbeat timeouts to ten seconds; lower that floor for speed.
    monkeypatch.setenv("DEX_LOCAL_ENGINE_MIN_HEARTBEAT_TIMEOUT", "0")
    with LocalEngine() as engine:
        made = Sem(engine.address, cache_dir)
        worker = ThreadWorker(made.registry, made.cache, engine.address).start()
        try:
            made.client.start_flow(made.flow(s.TimeoutFlow), "hb", "heartbeat")
            result = made.client.wait_for_flow("hb")
            output = result.completions[0].decode(str)
            assert "from=SilentStep-1|dex_local_engine.HeartbeatTimeout|" in output
            assert "heartbeat timeout: no heartbeat within 1 seconds" in output
        finally:
            worker.stop()
            made.cache.close()


def test_channels_maps_and_close_if_channels_empty(sem: Sem) -> None:
    client = sem.client
    queue = sem.flow(s.QueueFlow)
    client.start_flow(queue, "q", "drain")
    # Mail first: an RPC waits for the Steps the previous one started (ASYNC methods),
    # and the publish lets Drain empty the Channel and complete the Flow.
    client.invoke_rpc(queue.mail, "q", "mine")
    client.invoke_rpc(queue.mail, "q", "other")
    client.invoke_rpc(queue.publish, "q", ["j1", "j2", "j3"])
    result = client.wait_for_flow("q")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "j1,j2;j3;"


def test_transactional_rpc_is_all_or_nothing(sem: Sem) -> None:
    client = sem.client
    queue = sem.flow(s.QueueFlow)
    client.start_flow(queue, "tx", "hold")
    assert client.invoke_rpc(queue.pending, "tx") == []
    client.invoke_rpc(queue.publish, "tx", ["a", "b"])
    assert client.invoke_rpc(queue.pending, "tx") == ["a", "b"]
    with pytest.raises(ChannelMessageNotFoundError):
        client.invoke_rpc(queue.take_first, "tx", True)
    assert client.invoke_rpc(queue.pending, "tx") == ["a", "b"]
    assert client.invoke_rpc(queue.take_first, "tx", False) == "a"
    assert client.invoke_rpc(queue.pending, "tx") == ["b"]


def test_execute_locks_serialize_steps_and_fail_rpcs_fast(sem: Sem) -> None:
    client = sem.client
    locks = sem.flow(s.LockFlow)
    client.start_flow(locks, "locks", "x")
    conflict = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not conflict:
        try:
            client.invoke_rpc(locks.touch, "locks")
        except RpcLockConflictError:
            conflict = True
    assert conflict
    _wait_until(lambda: len(client.invoke_rpc(locks.read, "locks")) == 8)
    assert client.invoke_rpc(locks.read, "locks") in ("[aa][bb]", "[bb][aa]")


def test_canceled_running_step_result_is_discarded(sem: Sem) -> None:
    s.RunningCancelFlow.events.clear()
    sem.client.start_flow(sem.flow(s.RunningCancelFlow), "race", "x")
    result = sem.client.wait_for_flow("race")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "final"
    # Without a heartbeat timeout the running handler is not interrupted; its result is dropped.
    _wait_until(lambda: "blocker-returned" in s.RunningCancelFlow.events, 10)
    assert "blocker-saw-cancel" not in s.RunningCancelFlow.events


def test_flow_timeout_policies_and_start_delay(sem: Sem, engine: LocalEngine) -> None:
    from dex import StartFlowOptions

    client = sem.client
    handler_flow = sem.flow(s.TimeoutHandlerFlow)
    client.start_flow(handler_flow, "th", "x", StartFlowOptions(timeout=timedelta(hours=1)))
    # The handler waits on a Timer that SkipTimer can fire early.
    client.skip_timer("th", StepExecutionId("sys:timeout_handler", 1), TimerId(condition_index=0))
    result = client.wait_for_flow("th")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "expired:sys:timeout_handler-1"

    client.start_flow(
        sem.flow(s.ControlFlow), "fail-timeout", "x", StartFlowOptions(timeout=timedelta(seconds=1))
    )
    result = client.wait_for_flow("fail-timeout")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.FLOW_TIMEOUT
    assert result.error_message == "Flow timed out after 1 seconds"

    client.start_flow(
        sem.flow(s.FailureFlow),
        "delayed",
        "force-complete",
        StartFlowOptions(start_delay=timedelta(seconds=1)),
    )
    assert client.wait_for_flow("delayed").status is FlowStatus.COMPLETED
    events = _history(engine, "delayed")
    started = events[0].event_time.ToNanoseconds()
    first_attempt = events[1].step_execute_completed.context.started_time.ToNanoseconds()
    assert first_attempt - started >= 1_000_000_000  # the start Step waited for the delay
