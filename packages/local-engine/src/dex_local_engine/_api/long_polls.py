"""Long-polls over the engine's history: WaitForHistoryEvent."""

from __future__ import annotations

import time
from typing import cast

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.engine import Engine
from dex_local_engine._rules import errors


async def wait_for_history_event(
    engine: Engine, request: pb.WaitForHistoryEventRequest, seconds: float
) -> pb.WaitForHistoryEventResponse:
    """WaitForHistoryEvent: return once the run has an event with at least the given ID.

    As on Dex Server, the answer says whether such an event exists and the run's
    status; a run that closed (or moved on: continued as new, reset, replaced)
    without one answers ``event_available=False``, and the wait ends with the
    long-poll timeout after ``seconds``.
    """
    if not request.flow_id or not request.run_id or request.next_internal_event_id <= 0:
        raise errors.invalid("flow ID, run ID, and positive next event ID are required")
    flow = engine.flow(request.flow_id, active=False)
    if flow.run_id != request.run_id:
        raise errors.flow_not_found(f"{request.flow_id}/{request.run_id}", active=False)
    wanted = request.next_internal_event_id
    deadline = time.monotonic() + seconds
    while True:
        moved = flow.run_id != request.run_id  # continued as new: the run's history ended
        if not moved and flow.next_event_id > wanted:
            return pb.WaitForHistoryEventResponse(
                event_available=True,
                available_internal_event_id=wanted,  # event IDs have no gaps
                flow_status=cast(pb.FlowStatus, flow.status),
            )
        if moved or not flow.running or engine.flows.get(flow.flow_id) is not flow:
            status = pb.FLOW_STATUS_CONTINUED_AS_NEW if moved else flow.status
            return pb.WaitForHistoryEventResponse(flow_status=cast(pb.FlowStatus, status))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"history event {wanted} was recorded")
        await engine.wait_change(flow.flow_id, remaining)
