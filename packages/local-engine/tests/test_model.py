"""Persisted state round-trips through its JSON form unchanged."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules.model import Flow, MethodState, Phase, StaleSkip, StepExec


def test_active_step_round_trip() -> None:
    step = StepExec(
        sid="Tool-3",
        step_type="Tool",
        number=3,
        from_id="Model-2",
        step_input=pb.Value(string_value="in"),
        options=pb.StepOptions(execute_timeout_seconds=5, execute_lock_attribute_keys=["k"]),
        recovery=pb.RecoveryErrorInfo(detail="d", error_type="t"),
        order=7,
        phase=Phase.EXECUTE,
        method=MethodState(
            attempt=2,
            first_attempt_at=12.5,
            checkpoint=pb.Value(int_value=4),
            retry_at=99.0,
            running=True,
            started_attempts=1,
            last_error=pb.WorkerErrorResponse(detail="boom", error_type="E"),
        ),
        locals={"x": pb.Value(bool_value=True)},
        condition=pb.WaitingCondition(
            waiting_condition_type=pb.WAITING_CONDITION_TYPE_ANY_COMPLETED,
            timer_conditions=[pb.TimerCondition(duration_seconds=3)],
        ),
        wait_started=10.0,
        skipped_timers={0},
        results=pb.ConditionResults(wait_for_failed=True),
        wait_for_failed=True,
    )
    assert StepExec.from_json(step.to_json()) == step


def test_ended_step_keeps_only_its_identity() -> None:
    step = StepExec(
        sid="A-1",
        step_type="A",
        number=1,
        from_id="",
        step_input=pb.Value(string_value="big input"),
        options=pb.StepOptions(),
        recovery=None,
        order=1,
        phase=Phase.COMPLETED,
    )
    loaded = StepExec.from_json(step.to_json())
    assert (loaded.sid, loaded.step_type, loaded.number, loaded.order, loaded.phase) == (
        "A-1",
        "A",
        1,
        1,
        Phase.COMPLETED,
    )
    assert loaded.step_input == pb.Value()


def test_flow_row_round_trip() -> None:
    flow = Flow(
        flow_id="f",
        run_id="r",
        flow_type="T",
        request_id="q",
        start_time=1.5,
        config=pb.FlowConfig(worker_target=pb.WorkerTarget(is_pull_mode=True)),
        status=pb.FLOW_STATUS_COMPLETED,
        close_time=2.5,
        error_type=0,
        timeout_seconds=9,
        timeout_policy=pb.FLOW_TIMEOUT_POLICY_CANCEL,
        graceful=True,
        counters={"A": 2},
        outputs=[
            pb.StepCompletionOutput(completed_step_type="A", completed_step_execution_id="A-2")
        ],
        stale_skips=[StaleSkip("B-1", "t", None), StaleSkip("B-2", "", 1)],
        next_seq=5,
        next_event_id=6,
        next_order=7,
    )
    loaded = Flow.from_row("f", "r", "T", flow.status, flow.meta_json())
    assert loaded == flow
    assert loaded.is_pull
