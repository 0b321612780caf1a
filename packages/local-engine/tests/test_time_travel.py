"""ResetFlow to a point after the beginning: a time, a Step type, a Step execution.

Each test runs the travel Flow to its end through the real SDK, resets it, and checks
what the new run kept (history, Attributes, consumed messages), which methods ran
again, and what it did with the RPCs that came after the point.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest
import travel_app as app
from conftest import running_flows
from dex import (
    Client,
    FlowStatus,
    StepExecutionId,
    TimerId,
    TimeTravelOptions,
    TimeTravelStepMethod,
    TimeTravelType,
    WaitForStepCompletionOptions,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        running.client.travel = running.flows[0]  # type: ignore[attr-defined]
        yield running.client


def _flow(client: Client) -> app.TravelFlow:
    return client.travel  # type: ignore[attr-defined,no-any-return]


def _run_to_end(client: Client, flow_id: str) -> str:
    """Start, open the gate twice, wait for the end; returns the output."""
    flow = _flow(client)
    client.start_flow(flow, flow_id, "in")
    client.invoke_rpc(flow.open, flow_id, "a")
    _after_gate_one(client, flow_id)
    client.invoke_rpc(flow.open, flow_id, "b")
    output = client.wait_for_flow(flow_id).single_output(str)
    assert output == "in|in+a+b|rounds=2"
    return output


def _after_gate_one(client: Client, flow_id: str) -> None:
    """Wait until Gate-1 completed, so the second RPC lands after Gate-2 started."""
    client.wait_for_step_completion(
        flow_id, StepExecutionId("Gate", 1), WaitForStepCompletionOptions()
    )


def _to_step(sid: str, method: TimeTravelStepMethod, *, skip: bool = False) -> TimeTravelOptions:
    return TimeTravelOptions(
        TimeTravelType.STEP_EXECUTION_ID,
        step_execution_id=sid,
        step_method=method,
        skip_writes_reapply=skip,
    )


def _history(engine: LocalEngine, flow_id: str) -> list[pb.FlowHistoryEvent]:
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        return list(stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id=flow_id)).events)


def _summary(engine: LocalEngine, flow_id: str) -> pb.GetFlowSummaryResponse:
    with grpc.insecure_channel(engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        return stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id=flow_id))


def _kinds(events: list[pb.FlowHistoryEvent]) -> list[str]:
    return [str(event.WhichOneof("payload")) for event in events]


def _sid(event: pb.FlowHistoryEvent) -> str:
    kind = event.WhichOneof("payload")
    return getattr(event, str(kind)).context.step_execution_id


def _reset(engine: LocalEngine, **fields: object) -> pb.ResetFlowResponse:
    with grpc.insecure_channel(engine.address) as channel:
        return pb_grpc.FlowServiceStub(channel).ResetFlow(pb.ResetFlowRequest(**fields))  # type: ignore[arg-type]


def test_reset_to_a_wait_for_keeps_the_steps_before_and_reruns_that_step(
    client: Client, engine: LocalEngine
) -> None:
    _run_to_end(client, "wf")
    old = _history(engine, "wf")
    done = len(app.runs_of("wf"))
    run_id = client.time_travel(
        "wf",
        _to_step("Gate-2", TimeTravelStepMethod.WAIT_FOR),
    )
    # The second RPC came after Gate-2 started, so it is applied again.
    assert client.wait_for_flow("wf").single_output(str) == "in|in+a+b|rounds=2"
    assert client.describe_flow("wf").run_id == run_id
    assert app.runs_of("wf")[done:] == [
        "Gate-2 wait_for",
        "Gate-2 execute",
        "Finish-1 wait_for",
        "Finish-1 execute",
    ]
    # Everything up to the event that started Gate-2 (Gate-1's execute) is copied
    # with its original time; the fork and the re-applied RPC follow.
    kept = 1 + next(
        i
        for i, event in enumerate(old)
        if event.HasField("step_execute_completed") and _sid(event) == "Gate-1"
    )
    new = _history(engine, "wf")
    assert _kinds(new[:kept]) == _kinds(old[:kept])
    assert [e.event_time for e in new[:kept]] == [e.event_time for e in old[:kept]]
    first_run = old[0].flow_started_or_continued.flow_execution_id.run_id
    assert new[kept].time_travel_fork.previous_run_id == first_run
    assert new[kept + 1].HasField("rpc_execution_completed")


def test_reset_to_a_wait_for_without_reapplied_writes_waits_for_a_new_message(
    client: Client,
) -> None:
    _run_to_end(client, "wk")
    done = len(app.runs_of("wk"))
    client.time_travel(
        "wk",
        _to_step("Gate-2", TimeTravelStepMethod.WAIT_FOR, skip=True),
    )
    assert client.describe_flow("wk").status is FlowStatus.RUNNING
    client.invoke_rpc(_flow(client).open, "wk", "c")
    assert client.wait_for_flow("wk").single_output(str) == "in|in+a+c|rounds=2"
    assert app.runs_of("wk")[done:][:2] == ["Gate-2 wait_for", "Gate-2 execute"]


def test_reset_to_an_execute_hands_it_the_same_message_and_keeps_earlier_rpcs(
    client: Client,
) -> None:
    _run_to_end(client, "ex")
    done = len(app.runs_of("ex"))
    client.time_travel(
        "ex",
        _to_step("Gate-2", TimeTravelStepMethod.EXECUTE, skip=True),
    )
    # The RPC that published "b" came before Gate-2's wait ended, so even without
    # re-applied writes the new run hands "b" to execute again.
    assert client.wait_for_flow("ex").single_output(str) == "in|in+a+b|rounds=2"
    assert app.runs_of("ex")[done:] == ["Gate-2 execute", "Finish-1 wait_for", "Finish-1 execute"]


def test_reset_to_a_step_type_starts_at_its_first_execution_and_restores_attributes(
    client: Client,
) -> None:
    _run_to_end(client, "ty")
    done = len(app.runs_of("ty"))
    client.time_travel("ty", TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Gate"))
    # Back before Gate-1: rounds is unset again, Prepare's Attribute stays, and both
    # RPCs (after the point) are applied again in order.
    assert client.wait_for_flow("ty").single_output(str) == "in|in+a+b|rounds=2"
    assert app.runs_of("ty")[done:][:2] == ["Gate-1 wait_for", "Gate-1 execute"]
    assert "Prepare-1 execute" not in app.runs_of("ty")[done:]


def test_reset_to_a_step_type_without_reapplied_writes_waits_with_restored_state(
    client: Client,
) -> None:
    flow = _flow(client)
    _run_to_end(client, "tw")
    client.time_travel(
        "tw",
        TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Gate", skip_writes_reapply=True),
    )
    assert client.invoke_rpc(flow.state, "tw") == "in|0"  # rounds unset again
    client.invoke_rpc(flow.open, "tw", "x")
    client.invoke_rpc(flow.open, "tw", "y")
    assert client.wait_for_flow("tw").single_output(str) == "in|in+x+y|rounds=2"


def test_reset_to_a_time_keeps_the_events_before_it(client: Client, engine: LocalEngine) -> None:
    _run_to_end(client, "tm")
    old = _history(engine, "tm")
    done = len(app.runs_of("tm"))
    cut = next(
        i
        for i, event in enumerate(old)
        if event.HasField("step_execute_completed") and _sid(event) == "Gate-1"
    )
    client.time_travel(
        "tm",
        TimeTravelOptions(
            TimeTravelType.HISTORY_EVENT_TIME,
            history_event_time=old[cut].event_time.ToDatetime(tzinfo=UTC),
            skip_writes_reapply=True,
        ),
    )
    new = _history(engine, "tm")
    assert _kinds(new[:cut]) == _kinds(old[:cut])
    assert new[cut].HasField("time_travel_fork")
    # Gate-1 had taken "a" before the point: its execute runs again with it; the
    # second RPC came later and is not applied, so Gate-2 waits.
    assert client.describe_flow("tm").status is FlowStatus.RUNNING
    client.invoke_rpc(_flow(client).open, "tm", "late")
    assert client.wait_for_flow("tm").single_output(str) == "in|in+a+late|rounds=2"
    assert app.runs_of("tm")[done:][:2] == ["Gate-1 execute", "Gate-2 wait_for"]
    assert client.invoke_rpc(_flow(client).state, "tm") == "in|2"


def test_a_timer_and_the_start_keep_their_original_times(
    client: Client, engine: LocalEngine
) -> None:
    flow = _flow(client)
    client.start_flow(flow, "tt", "in")
    client.invoke_rpc(flow.hold_timer, "tt", 3600)
    client.invoke_rpc(flow.open, "tt", "a")
    _after_gate_one(client, "tt")
    client.invoke_rpc(flow.open, "tt", "b")
    client.skip_timer("tt", StepExecutionId("Finish", 1), TimerId(condition_index=0))
    client.wait_for_flow("tt")
    old = _history(engine, "tt")
    waited = next(e for e in old if e.HasField("step_wait_for_completed") and _sid(e) == "Finish-1")
    finished = next(
        e for e in old if e.HasField("step_execute_completed") and _sid(e) == "Finish-1"
    )
    started = _summary(engine, "tt").start_time
    client.time_travel(
        "tt",
        TimeTravelOptions(
            TimeTravelType.HISTORY_EVENT_TIME,
            history_event_time=finished.event_time.ToDatetime(tzinfo=UTC),
        ),
    )
    # Finish-1 waits again on its hour-long Timer (the SkipTimer is not history), but
    # from when it first waited, not from the reset; the run keeps its start time.
    with grpc.insecure_channel(engine.address) as channel:
        state = pb_grpc.FlowServiceStub(channel).GetFlowState(pb.GetFlowStateRequest(flow_id="tt"))
    (finish,) = [s for s in state.active_step_executions if s.step_execution_id == "Finish-1"]
    (timer,) = finish.timers
    assert timer.status == pb.INTERNAL_TIMER_STATUS_PENDING
    assert timer.firing_unix_timestamp_seconds == int(
        waited.event_time.ToNanoseconds() / 1e9 + 3600
    )
    new = _history(engine, "tt")
    assert new[0].event_time == old[0].event_time
    assert _summary(engine, "tt").start_time == started


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"reset_type": pb.FLOW_RESET_TYPE_UNSPECIFIED}, "needs a reset_type"),
        (
            {"reset_type": pb.FLOW_RESET_TYPE_BEGINNING, "step_method": 1},
            "step_method applies only",
        ),
        ({"reset_type": pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME}, "needs history_event_time"),
        (
            {"reset_type": pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME, "history_event_time": "soon"},
            "is not an RFC 3339 time",
        ),
        (
            {
                "reset_type": pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME,
                "history_event_time": "2999-01-01T00:00:00Z",
            },
            "recorded no event at or after",
        ),
        ({"reset_type": pb.FLOW_RESET_TYPE_STEP_TYPE}, "needs step_type"),
        (
            {"reset_type": pb.FLOW_RESET_TYPE_STEP_TYPE, "step_type": "Nope"},
            "no execution of Step type 'Nope'",
        ),
        (
            {"reset_type": pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID, "step_execution_id": "Gate-1"},
            "needs step_method WAIT_FOR or EXECUTE",
        ),
        (
            {
                "reset_type": pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID,
                "step_execution_id": "Gate-9",
                "step_method": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
            },
            "'Gate-9' ran no wait_for method",
        ),
        (
            {
                "reset_type": pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID,
                "step_execution_id": "Prepare-1",
                "step_method": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
            },
            "'Prepare-1' ran no wait_for method",
        ),
    ],
)
def test_a_bad_target_is_refused_and_the_run_is_untouched(
    client: Client, engine: LocalEngine, fields: dict[str, object], problem: str
) -> None:
    _run_to_end(client, "bad")
    run_id = client.describe_flow("bad").run_id
    with pytest.raises(grpc.RpcError) as raised:
        _reset(engine, flow_id="bad", **fields)
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert problem in str(raised.value.details())
    assert client.describe_flow("bad").run_id == run_id
    assert client.describe_flow("bad").status is FlowStatus.COMPLETED


def test_a_time_before_the_start_resets_to_the_beginning(
    client: Client, engine: LocalEngine
) -> None:
    _run_to_end(client, "early")
    done = len(app.runs_of("early"))
    _reset(
        engine,
        flow_id="early",
        reset_type=pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME,
        history_event_time=datetime(2000, 1, 1, tzinfo=UTC).isoformat(),
    )
    assert client.wait_for_flow("early").single_output(str) == "in|in+a+b|rounds=2"
    assert app.runs_of("early")[done] == "Prepare-1 execute"
