"""An async Flow for the AsyncWorker and AsyncClient test."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    Stream,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)


class AsyncWaiter(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        await context.heartbeat("waiting")
        return Wait.any_of(Timer.by_duration(timedelta(hours=1)), AsyncFlow.inbox.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        AsyncFlow.notes.write(context, "executing")
        await asyncio.sleep(0.01)
        return graceful_complete(f"{input}:{list(AsyncFlow.inbox.results(context))}")


class AsyncFlow(Flow[str]):
    inbox = Channel("inbox", str)
    notes = Stream("notes", str, 100_000)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(AsyncWaiter())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.notes)

    @rpc
    async def send(self, context: Context, text: str) -> RPCResult[str]:
        self.inbox.publish(context, text)
        return RPCResult(text.upper())


def flows() -> list[Flow[Any]]:
    return [AsyncFlow()]
