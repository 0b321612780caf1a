"""A Flow with a Step chain for the time travel tests: each method notes that it ran.

``Prepare`` writes an Attribute and moves to ``Gate``; ``Gate`` waits for one
message on ``go`` (sent by the ``open`` RPC), counts its rounds in an Attribute and
runs twice; ``Finish`` waits on a short Timer and completes with what it read.
"""

from __future__ import annotations

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
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)

RUNS: list[str] = []  # "<flow ID> <Step execution ID> <method>", in the order methods ran


def _ran(context: Context, method: str) -> None:
    RUNS.append(f"{context.flow_id} {context.step_execution_id} {method}")


def runs_of(flow_id: str) -> list[str]:
    """The methods that ran for one Flow ID: ``"<Step execution ID> <method>"``."""
    return [run.split(" ", 1)[1] for run in RUNS if run.split(" ", 1)[0] == flow_id]


class Prepare(Step[str]):
    """Notes its input in ``prepared`` and moves to the gate."""

    def execute(self, context: Context, input: str) -> StepDecision:
        _ran(context, "execute")
        TravelFlow.prepared.set(context, input)
        return go_to(Gate, input)


class Gate(Step[str]):
    """Waits for one ``go`` message; the second round moves on to ``Finish``."""

    def wait_for(self, context: Context, input: str) -> Wait:
        _ran(context, "wait_for")
        return Wait.until(TravelFlow.go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        _ran(context, "execute")
        rounds = (TravelFlow.rounds.get(context) or 0) + 1
        TravelFlow.rounds.set(context, rounds)
        note = f"{input}+{TravelFlow.go.results(context)[0]}"
        return go_to(Gate, note) if rounds < 2 else go_to(Finish, note)


class Finish(Step[str]):
    """Waits on a Timer of ``TravelFlow.timer_seconds``, then completes."""

    def wait_for(self, context: Context, input: str) -> Wait:
        _ran(context, "wait_for")
        seconds = TravelFlow.timer_seconds.get(context) or 0
        return Wait.until(Timer.by_duration(timedelta(seconds=seconds)))

    def execute(self, context: Context, input: str) -> StepDecision:
        _ran(context, "execute")
        prepared = TravelFlow.prepared.get(context)
        return graceful_complete(f"{prepared}|{input}|rounds={TravelFlow.rounds.get(context)}")


class TravelFlow(Flow[str]):
    """Prepare, two Gate rounds, Finish."""

    go = Channel("go", str)
    prepared = Attribute("prepared", str)
    rounds = Attribute("rounds", int)
    timer_seconds = Attribute("timer_seconds", int)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Prepare()).other_steps(Gate(), Finish())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.go, self.prepared, self.rounds, self.timer_seconds)

    @rpc
    def open(self, context: Context, value: str) -> RPCResult[None]:
        self.go.publish(context, value)
        return RPCResult(None)

    @rpc
    def state(self, context: Context) -> RPCResult[str]:
        return RPCResult(f"{self.prepared.get(context)}|{self.rounds.get(context)}")

    @rpc
    def hold_timer(self, context: Context, seconds: int) -> RPCResult[None]:
        self.timer_seconds.set(context, seconds)
        return RPCResult(None)


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [TravelFlow()]
