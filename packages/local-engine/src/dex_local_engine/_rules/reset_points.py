"""Where a ResetFlow (time travel) leaves the old run: request checks and reset points.

Dex Server resets a run to the end of one of its decisions: everything the run
recorded before that decision stays, the decision runs again, and what came after is
dropped (except the writes from outside, which the reset applies again). In this
engine's history that point is an event boundary:

- ``BEGINNING``: right after the Flow started; nothing of the old run stays.
- ``HISTORY_EVENT_TIME``: before the first event recorded at or after the time.
- ``STEP_EXECUTION_ID`` with ``WAIT_FOR``: right after the event that started the Step
  execution, so its wait_for runs again; with ``EXECUTE``: right after the event that
  completed its wait (its condition met), so its execute runs again with the same
  condition results.
- ``STEP_TYPE``: the first execution of that Step type whose methods ran, at its
  first method (wait_for, or execute for a Step that skips wait_for), as Dex Server
  scans the history from its start.

The functions here are pure: they read the old run's history and active Steps and
either name the point or raise the error a Client gets, before anything changes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Phase, StepExec

_WAIT_FOR_EVENTS = ("step_wait_for_completed", "step_wait_for_failed", "step_wait_for_pending")
_EXECUTE_EVENTS = ("step_execute_completed", "step_execute_failed", "step_execute_pending")
_RANGE = re.compile(r"([1-9][0-9]{0,5})(s|second|m|minute|h|hour|d|day|w|week|M|month|y|year)")
_UNIT_SECONDS = {
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86_400,
    "w": 7 * 86_400,
    "M": 30 * 86_400,
    "y": 365 * 86_400,
}


@dataclass(frozen=True)
class ResetPoint:
    """Where the new run leaves the old run's history.

    ``before_event`` stops the replay before the event with that ID (a time point,
    or 2 for the beginning); ``step_execution_id`` stops it once that Step execution
    reached its wait_for (or, with ``execute``, its execute) method.
    """

    before_event: int = 0
    step_execution_id: str = ""
    execute: bool = False

    @property
    def beginning(self) -> bool:
        """Whether the new run keeps nothing of the old one."""
        return self.before_event == 2 and not self.step_execution_id


def check_request(request: pb.ResetFlowRequest) -> None:
    """Refuse a request whose reset type lacks its target, as Dex Server does."""
    if not request.flow_id:
        raise errors.invalid("ResetFlow needs a flow_id")
    kind = request.reset_type
    if kind == pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID:
        if not request.step_execution_id:
            raise errors.invalid("a reset to a Step execution needs its step_execution_id")
        if request.step_method not in (
            pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
            pb.FLOW_RESET_STEP_METHOD_EXECUTE,
        ):
            raise errors.invalid(
                "a reset to a Step execution needs step_method WAIT_FOR or EXECUTE"
            )
        return
    if kind not in (
        pb.FLOW_RESET_TYPE_BEGINNING,
        pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME,
        pb.FLOW_RESET_TYPE_STEP_TYPE,
    ):
        raise errors.invalid("ResetFlow needs a reset_type")
    if kind == pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME and not request.history_event_time:
        raise errors.invalid("a reset to a time needs history_event_time")
    if kind == pb.FLOW_RESET_TYPE_STEP_TYPE and not request.step_type:
        raise errors.invalid("a reset to a Step type needs step_type")
    if request.step_method != pb.FLOW_RESET_STEP_METHOD_UNSPECIFIED:
        raise errors.invalid("step_method applies only to a reset to a Step execution ID")


def parse_event_time(text: str, now: float | None = None) -> float:
    """Seconds since the epoch for ``history_event_time``.

    Accepted as Dex Server accepts it: an RFC 3339 time with its offset, a whole
    number of nanoseconds since the epoch, or a span back from now such as ``90s``,
    ``2h`` or ``3day`` (units s, m, h, d, w, M, y or their names).
    """
    text = text.strip()
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text) / 1e9
    span = _RANGE.fullmatch(text)
    if span is not None:
        unit = span.group(2)
        seconds = _UNIT_SECONDS[unit if len(unit) == 1 else unit[0]]
        return max(0.0, (time.time() if now is None else now) - int(span.group(1)) * seconds)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise errors.invalid(
            f"history_event_time {text!r} is not an RFC 3339 time with an offset, "
            "nanoseconds since the epoch, or a span such as '2h'"
        )
    return moment.timestamp()


def event_seconds(event: pb.FlowHistoryEvent) -> float:
    """When an event was recorded, in seconds since the epoch."""
    return event.event_time.ToNanoseconds() / 1e9


def time_point(events: list[pb.FlowHistoryEvent], text: str, run_id: str) -> ResetPoint:
    """The point before the first event at or after the time (never before the start)."""
    at = parse_event_time(text)
    for event in events:
        if event_seconds(event) >= at:
            return ResetPoint(before_event=max(2, event.event_id))
    raise errors.invalid(f"run {run_id} recorded no event at or after {text!r}")


def step_point(
    request: pb.ResetFlowRequest,
    events: Iterable[pb.FlowHistoryEvent],
    active: Mapping[str, StepExec],
    run_id: str,
) -> ResetPoint:
    """The point of a Step execution (or the first execution of a Step type)."""
    ran = methods_ran(events, active)
    if request.reset_type == pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID:
        sid = request.step_execution_id
        execute = request.step_method == pb.FLOW_RESET_STEP_METHOD_EXECUTE
        method = "execute" if execute else "wait_for"
        if method not in ran.get(sid, ()):
            raise errors.invalid(f"Step execution {sid!r} ran no {method} method in run {run_id}")
        return ResetPoint(step_execution_id=sid, execute=execute)
    candidates = [
        (number, sid, methods)
        for sid, methods in ran.items()
        for step_type, number in [_split(sid)]
        if step_type == request.step_type
    ]
    if not candidates:
        raise errors.invalid(f"no execution of Step type {request.step_type!r} ran in run {run_id}")
    _, sid, methods = min(candidates)
    return ResetPoint(step_execution_id=sid, execute="wait_for" not in methods)


def methods_ran(
    events: Iterable[pb.FlowHistoryEvent], active: Mapping[str, StepExec]
) -> dict[str, list[str]]:
    """Step execution ID -> the methods ("wait_for", "execute") it handed to Workers."""
    ran: dict[str, list[str]] = {}

    def note(sid: str, method: str) -> None:
        methods = ran.setdefault(sid, [])
        if method not in methods:
            methods.append(method)

    for event in events:
        kind = event.WhichOneof("payload")
        if kind in _WAIT_FOR_EVENTS or kind in _EXECUTE_EVENTS:
            entry = getattr(event, kind)
            note(
                entry.context.step_execution_id,
                "wait_for" if kind in _WAIT_FOR_EVENTS else "execute",
            )
    for sid, step in active.items():
        if step.phase is Phase.WAIT_FOR:
            note(sid, "wait_for")
        elif step.phase is Phase.EXECUTE:
            note(sid, "execute")
    return ran


def _split(sid: str) -> tuple[str, int]:
    step_type, _, number = sid.rpartition("-")
    return (step_type, int(number)) if number.isdigit() else ("", 0)
