"""Reset points from a history and active Steps, and the time forms a reset accepts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules import reset_points
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.model import Phase, StepExec
from dex_local_engine._rules.values import stamp


def _event(event_id: int, seconds: float, kind: str = "", sid: str = "") -> pb.FlowHistoryEvent:
    event = pb.FlowHistoryEvent(event_id=event_id, event_time=stamp(seconds))
    if kind:
        getattr(event, kind).context.step_execution_id = sid
    else:
        event.flow_started_or_continued.flow_type = "T"
    return event


def _active(sid: str, phase: Phase) -> StepExec:
    step_type, _, number = sid.rpartition("-")
    return StepExec(
        sid=sid,
        step_type=step_type,
        number=int(number),
        from_id="",
        step_input=pb.Value(),
        options=pb.StepOptions(),
        recovery=None,
        order=1,
        phase=phase,
    )


HISTORY = [
    _event(1, 100.0),
    _event(2, 101.0, "step_execute_completed", "Start-1"),  # skips wait_for
    _event(3, 102.0, "step_wait_for_completed", "Loop-1"),
    _event(4, 103.0, "step_execute_completed", "Loop-1"),
    _event(5, 104.0, "step_wait_for_completed", "Loop-2"),
]


def test_time_forms() -> None:
    assert (
        reset_points.parse_event_time("2026-12-01T03:00:00Z")
        == datetime(2026, 12, 1, 3, tzinfo=UTC).timestamp()
    )
    assert (
        reset_points.parse_event_time("2026-12-01T04:00:00+01:00")
        == datetime(2026, 12, 1, 3, tzinfo=UTC).timestamp()
    )
    assert reset_points.parse_event_time("1500000000000000000") == 1_500_000_000.0
    assert reset_points.parse_event_time("90s", now=1000.0) == 910.0
    assert reset_points.parse_event_time("2hour", now=10_000.0) == 2800.0
    assert reset_points.parse_event_time("1y", now=10.0) == 0.0  # never before the epoch
    for bad in ("2026-12-01T03:00:00", "yesterday", "0s", "5fortnight", ""):
        with pytest.raises(DexError, match="is not an RFC 3339 time"):
            reset_points.parse_event_time(bad)


def test_a_time_point_stops_before_the_first_event_at_or_after_it() -> None:
    at = lambda seconds: datetime.fromtimestamp(seconds, UTC).isoformat()  # noqa: E731
    assert reset_points.time_point(HISTORY, at(102.5), "r").before_event == 4
    assert reset_points.time_point(HISTORY, at(103.0), "r").before_event == 4
    assert reset_points.time_point(HISTORY, at(50.0), "r").before_event == 2  # the beginning
    assert reset_points.time_point(HISTORY, at(50.0), "r").beginning
    with pytest.raises(DexError, match="run r recorded no event at or after"):
        reset_points.time_point(HISTORY, at(105.0), "r")


def test_methods_that_ran_come_from_the_history_and_the_active_steps() -> None:
    active = {
        "Loop-2": _active("Loop-2", Phase.EXECUTE),
        "Loop-3": _active("Loop-3", Phase.WAIT_FOR),
    }
    ran = reset_points.methods_ran(HISTORY, active)
    assert ran == {
        "Start-1": ["execute"],
        "Loop-1": ["wait_for", "execute"],
        "Loop-2": ["wait_for", "execute"],
        "Loop-3": ["wait_for"],
    }
    waiting = {"Loop-4": _active("Loop-4", Phase.WAIT_FOR_LOCK)}
    assert "Loop-4" not in reset_points.methods_ran([], waiting)  # never reached a Worker


def _request(**fields: object) -> pb.ResetFlowRequest:
    return pb.ResetFlowRequest(flow_id="f", **fields)  # type: ignore[arg-type]


def test_step_points() -> None:
    by_type = reset_points.step_point(
        _request(reset_type=pb.FLOW_RESET_TYPE_STEP_TYPE, step_type="Loop"), HISTORY, {}, "r"
    )
    assert (by_type.step_execution_id, by_type.execute) == ("Loop-1", False)
    no_wait_for = reset_points.step_point(
        _request(reset_type=pb.FLOW_RESET_TYPE_STEP_TYPE, step_type="Start"), HISTORY, {}, "r"
    )
    assert (no_wait_for.step_execution_id, no_wait_for.execute) == ("Start-1", True)
    execute = reset_points.step_point(
        _request(
            reset_type=pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID,
            step_execution_id="Loop-1",
            step_method=pb.FLOW_RESET_STEP_METHOD_EXECUTE,
        ),
        HISTORY,
        {},
        "r",
    )
    assert (execute.step_execution_id, execute.execute, execute.beginning) == (
        "Loop-1",
        True,
        False,
    )
    with pytest.raises(DexError, match="'Loop-2' ran no execute method in run r"):
        reset_points.step_point(
            _request(
                reset_type=pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID,
                step_execution_id="Loop-2",
                step_method=pb.FLOW_RESET_STEP_METHOD_EXECUTE,
            ),
            HISTORY,
            {},
            "r",
        )


def test_request_checks() -> None:
    reset_points.check_request(_request(reset_type=pb.FLOW_RESET_TYPE_BEGINNING))
    with pytest.raises(DexError, match="ResetFlow needs a flow_id"):
        reset_points.check_request(pb.ResetFlowRequest(reset_type=pb.FLOW_RESET_TYPE_BEGINNING))
    with pytest.raises(DexError, match="step_method applies only"):
        reset_points.check_request(
            _request(reset_type=pb.FLOW_RESET_TYPE_STEP_TYPE, step_type="A", step_method=2)
        )
