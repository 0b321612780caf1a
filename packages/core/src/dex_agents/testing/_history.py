"""Step history of a Flow, read from the engine's ``GetHistoryEvents``.

The Dex Client has no history call, so this reads the raw FlowService. Tests use
it to assert a turn's Step shape, such as ``RunModel, CallTool, ResumeTurn, RunModel``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2, dex_pb2_grpc

from dex_agents._host_auth import bearer_metadata

_HISTORY_PAGE_SIZE = 500


class StepMethod(StrEnum):
    """Which method of a Step a history entry is about."""

    WAIT_FOR = "wait_for"
    EXECUTE = "execute"


class StepOutcome(StrEnum):
    """How a Step method's attempt ended."""

    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class StepHistoryEntry:
    """One finished Step method in a Flow's history."""

    event_id: int
    step_type: str
    step_execution_id: str
    method: StepMethod
    outcome: StepOutcome
    final_attempt: int
    failure_message: str
    event_time: datetime
    """When the engine recorded the result (UTC)."""


_STEP_EVENT_KINDS: dict[str, tuple[StepMethod, StepOutcome]] = {
    "step_wait_for_completed": (StepMethod.WAIT_FOR, StepOutcome.COMPLETED),
    "step_wait_for_failed": (StepMethod.WAIT_FOR, StepOutcome.FAILED),
    "step_execute_completed": (StepMethod.EXECUTE, StepOutcome.COMPLETED),
    "step_execute_failed": (StepMethod.EXECUTE, StepOutcome.FAILED),
}


def _entry(event: dex_pb2.FlowHistoryEvent) -> StepHistoryEntry | None:
    kind = event.WhichOneof("payload")
    if kind not in _STEP_EVENT_KINDS:
        return None
    method, outcome = _STEP_EVENT_KINDS[kind]
    payload = getattr(event, kind)
    failure_message = ""
    if outcome is StepOutcome.FAILED:
        failure_message = str(payload.output.failure)
    return StepHistoryEntry(
        event_id=event.event_id,
        step_type=payload.context.step_type,
        step_execution_id=payload.context.step_execution_id,
        method=method,
        outcome=outcome,
        final_attempt=payload.context.final_attempt,
        failure_message=failure_message,
        event_time=event.event_time.ToDatetime(tzinfo=UTC),
    )


async def read_step_history(
    server_address: str, flow_id: str, *, run_id: str = "", token: str | None = None
) -> list[StepHistoryEntry]:
    """Every completed or failed Step method of ``flow_id``, in history order.

    ``token`` is the bearer token of a server that requires one (default:
    ``DEX_SERVER_TOKEN`` when set)."""
    metadata = bearer_metadata(token)
    if not flow_id:
        raise ValueError("flow_id must not be empty")
    entries: list[StepHistoryEntry] = []
    async with grpc.aio.insecure_channel(server_address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        get_history_events = cast(
            Callable[..., Awaitable[dex_pb2.GetHistoryEventsResponse]], stub.GetHistoryEvents
        )
        page_token = b""
        while True:
            response = await get_history_events(
                dex_pb2.GetHistoryEventsRequest(
                    flow_id=flow_id,
                    run_id=run_id,
                    estimate_page_size=_HISTORY_PAGE_SIZE,
                    next_page_token=page_token,
                ),
                metadata=metadata,
            )
            for event in response.events:
                entry = _entry(event)
                if entry is not None:
                    entries.append(entry)
            if not response.next_page_token or not response.events:
                return entries
            page_token = response.next_page_token


def executed_step_types(history: list[StepHistoryEntry]) -> list[str]:
    """The Step types whose execute method completed, in order: a turn's Step shape."""
    return [
        entry.step_type
        for entry in history
        if entry.method is StepMethod.EXECUTE and entry.outcome is StepOutcome.COMPLETED
    ]
