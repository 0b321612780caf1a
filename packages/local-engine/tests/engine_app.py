"""Flows the engine tests run on real Dex SDK Workers (in process or in child processes)."""

from __future__ import annotations

import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

from dex import (
    Attribute,
    AttributeLock,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    StepOutput,
    Stream,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    heartbeat,
    rpc,
)


class AgentStart(Step[str]):
    def __init__(self, flow: AgentFlow) -> None:
        self.flow = flow

    def execute(self, context: Context, input: str) -> Generator[StepOutput, None, StepDecision]:
        yield heartbeat({"step": "start"})
        yield self.flow.events.write(context, f"hello-from-{context.step_execution_id}")
        return go_to(AgentWaiter, input)


class AgentWaiter(Step[str]):
    def __init__(self, flow: AgentFlow) -> None:
        self.flow = flow

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(seconds=30)), self.flow.inbox.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        messages = list(self.flow.inbox.results(context))
        counter = self.flow.counter.get(context)
        return graceful_complete(f"{input}|msgs={messages}|counter={counter}")


class AgentFlow(Flow[str]):
    inbox = Channel("inbox", str)
    counter = Attribute("counter", int)
    events = Stream("events", str, 1_000_000)

    def __init__(self) -> None:
        self.start = AgentStart(self)
        self.waiter = AgentWaiter(self)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.start).other_steps(self.waiter)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.counter, self.events)

    @rpc(lock_attributes=[AttributeLock(counter)])
    def bump(self, context: Context, amount: int) -> RPCResult[int]:
        value = (self.counter.get(context) or 0) + amount
        self.counter.set(context, value)
        self.inbox.publish(context, f"bumped-{value}")
        return RPCResult(value)

    @rpc(lock_attributes=[AttributeLock(counter)])
    def slow_bump(self, context: Context, seconds: float) -> RPCResult[int]:
        time.sleep(seconds)
        return RPCResult(0)

    @rpc(lock_attributes=[AttributeLock(counter)])
    def locked_peek(self, context: Context) -> RPCResult[int]:
        return RPCResult(self.counter.get(context) or 0)

    @rpc
    def boom(self, context: Context, text: str) -> RPCResult[str]:
        raise ValueError(f"{text}!")

    @rpc
    def peek(self, context: Context) -> RPCResult[int]:
        return RPCResult(self.counter.get(context) or 0)


class NewerAgentFlow(AgentFlow):
    """A newer version of AgentFlow with an RPC the running Workers lack (not in flows())."""

    def get_flow_type(self) -> str:
        return "AgentFlow"

    @rpc
    def ghost(self, context: Context) -> RPCResult[str]:
        return RPCResult("boo")


class LongStep(Step[int]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            heartbeat_timeout=timedelta(seconds=30),
            execute_retry=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
        )

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        checkpoint = context.get_last_heartbeat_value(int)
        start = checkpoint or 0
        for i in range(start, input):
            time.sleep(0.25)
            yield heartbeat(i + 1)
        return graceful_complete(f"attempt={context.attempt} resumed_from={checkpoint}")


class LongFlow(Flow[int]):
    def __init__(self) -> None:
        self.long = LongStep()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.long)


class CounterWait(Step[str]):
    def __init__(self, flow: CounterFlow) -> None:
        self.flow = flow

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(self.flow.go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"{input}:{self.flow.total.get(context)}")


class CounterFlow(Flow[str]):
    """Keeps a total in an Attribute until an RPC publishes to ``go``."""

    go = Channel("go", str)
    total = Attribute("total", int)

    def __init__(self) -> None:
        self.wait = CounterWait(self)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.wait)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.go, self.total)

    @rpc(lock_attributes=[AttributeLock(total)])
    def add(self, context: Context, amount: int) -> RPCResult[int]:
        value = (self.total.get(context) or 0) + amount
        self.total.set(context, value)
        return RPCResult(value)

    @rpc
    def finish(self, context: Context) -> RPCResult[None]:
        self.go.publish(context, "go")
        return RPCResult(None)


class Nap(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(f"napped {input}s, fired={context.has_timer_fired(0)}")


class NapFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Nap())


class Quiet(Step[int]):
    """Sends no output before it finishes."""

    def execute(self, context: Context, input: int) -> StepDecision:
        if context.attempt == 1:
            time.sleep(input)
        return graceful_complete(f"attempt={context.attempt}")


class QuietFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Quiet())


def flows() -> list[Flow[Any]]:
    return [AgentFlow(), LongFlow(), CounterFlow(), NapFlow(), QuietFlow()]


__all__ = ["AgentFlow", "LongFlow", "StepMovement", "flows"]
