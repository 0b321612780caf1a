"""Flows for the RPC ordering and closed-Flow RPC rules (test_rpc_semantics.py)."""

from __future__ import annotations

import threading
import time
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
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    Wait,
    dead_end,
    graceful_complete,
    rpc,
)

RELEASE = threading.Event()  # the Worker runs on a thread of the test process


class SlowMark(Step[str]):
    """Sets an Attribute after a pause, then dead-ends (default, ASYNC durability)."""

    def execute(self, context: Context, input: str) -> StepDecision:
        time.sleep(0.05)
        MarkFlow.mark.set(context, input)
        return dead_end()


class MarkFlow(Flow[str]):
    """A start Step that writes an Attribute; RPCs read and write it."""

    mark = Attribute("mark", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(SlowMark())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.mark)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.mark.get(context) or "")

    @rpc
    def restart(self, context: Context, value: str) -> RPCResult[str]:
        return RPCResult(value, next_steps=(StepMovement.of(SlowMark, value),))


class SyncSlowMark(Step[str]):
    """Like SlowMark with SYNC durability, held until the test sets ``RELEASE``: Dex
    Server runs a SYNC method outside the workflow task, so an RPC does not wait."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_durability=StepDurability.SYNC)

    def execute(self, context: Context, input: str) -> StepDecision:
        RELEASE.wait(30)
        SyncMarkFlow.mark.set(context, input)
        return dead_end()


class SyncMarkFlow(Flow[str]):
    """A SYNC start Step that writes an Attribute once released."""

    mark = Attribute("mark", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(SyncSlowMark())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.mark)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.mark.get(context) or "")


class Finish(Step[str]):
    """Writes the Attribute and completes the Flow."""

    def execute(self, context: Context, input: str) -> StepDecision:
        ClosedFlow.mark.set(context, input)
        return graceful_complete(input)


class ClosedFlow(Flow[str]):
    """Completes at once; RPCs read (allowed after close) or write (refused)."""

    mark = Attribute("mark", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Finish())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.mark)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.mark.get(context) or "")

    @rpc
    def write(self, context: Context, value: str) -> RPCResult[str]:
        self.mark.set(context, value)
        return RPCResult(value)


class AwaitPoke(Step[str]):
    """Waits for one ``poke`` message, then (after a pause) writes it and dead-ends."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(PokeFlow.poke.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        time.sleep(0.05)
        PokeFlow.mark.set(context, PokeFlow.poke.results(context)[0])
        return dead_end()


class PokeFlow(Flow[str]):
    """A Step unblocked by a publish from outside; an RPC reads what it wrote."""

    poke = Channel("poke", str)
    mark = Attribute("mark", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(AwaitPoke())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.poke, self.mark)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.mark.get(context) or "")


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [MarkFlow(), SyncMarkFlow(), ClosedFlow(), PokeFlow()]
