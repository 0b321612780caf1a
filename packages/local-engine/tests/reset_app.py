"""A Flow whose progress comes from outside (an RPC), for the ResetFlow tests."""

from __future__ import annotations

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
    Wait,
    graceful_complete,
    rpc,
)


class AwaitGo(Step[str]):
    """Waits for one message on ``go``, then completes with the note."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(GoFlow.go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"{input}:{GoFlow.note.get(context)}")


class GoFlow(Flow[str]):
    """Completes once the ``release`` RPC wrote the note and published ``go``."""

    go = Channel("go", str)
    note = Attribute("note", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(AwaitGo())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.go, self.note)

    @rpc
    def release(self, context: Context, note: str) -> RPCResult[None]:
        self.note.set(context, note)
        self.go.publish(context, "now")
        return RPCResult(None)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.note.get(context) or "")


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [GoFlow()]
