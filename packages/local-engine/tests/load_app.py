"""A session-like Flow for the engine-restart-under-load test.

Each session runs ``WORK_STEPS`` Steps in sequence (each adds one to an Attribute,
publishes one Channel message and writes one Stream message), then waits for a
Timer and a ``ping`` RPC's message together, then drains the Channel and reports
what it found.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

from dex import (
    Attribute,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    Stream,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)

WORK_STEPS = 4
TIMER_SECONDS = 2


class Work(Step[int]):
    """One unit of work: committed effects only count once, however often it runs."""

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        yield SessionFlow.trace.write(context, f"work-{input}")
        time.sleep(0.02)  # a little work, so kills land inside attempts too
        SessionFlow.done.set(context, (SessionFlow.done.get(context) or 0) + 1)
        SessionFlow.log.publish(context, f"log-{input}")
        if input < WORK_STEPS:
            return go_to(Work, input + 1)
        return go_to(Rest, 0)


class Rest(Step[int]):
    """Waits for its Timer and a ping together, then drains the log."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.all_of(
            Timer.by_duration(timedelta(seconds=TIMER_SECONDS)),
            SessionFlow.pings.for_one(),
            SessionFlow.log.for_range(at_least=WORK_STEPS, at_most=WORK_STEPS),
        )

    def execute(self, context: Context, input: int) -> StepDecision:
        logs = ",".join(SessionFlow.log.results(context))
        return graceful_complete(
            f"done={SessionFlow.done.get(context)}|timer={context.has_timer_fired(0)}"
            f"|ping={SessionFlow.pinged.get(context)}|logs={logs}"
        )


class SessionFlow(Flow[int]):
    """The session."""

    done = Attribute("done", int)
    pinged = Attribute("pinged", str)
    log = Channel("log", str)
    pings = Channel("pings", str)
    trace = Stream("trace", str, 10_000_000)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Work()).other_steps(Rest())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.done, self.pinged, self.log, self.pings, self.trace)

    @rpc
    def ping(self, context: Context, note: str) -> RPCResult[str]:
        self.pinged.set(context, note)
        self.pings.publish(context, note)
        return RPCResult(note)


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [SessionFlow()]
