"""A Flow with indexed Attributes for the SearchFlows tests."""

from __future__ import annotations

from typing import Any

from dex import (
    Attribute,
    AttributeIndex,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    dead_end,
    graceful_complete,
)


class Index(Step[int]):
    """Indexes the input as a keyword (under its own key) and a number (renamed key)."""

    def execute(self, context: Context, input: int) -> StepDecision:
        OrderFlow.label.set(context, f"order-{input}")
        OrderFlow.amount.set(context, input)
        if input % 2:
            return graceful_complete(input)
        return dead_end()


class OrderFlow(Flow[int]):
    """Odd inputs complete; even ones keep running."""

    label = Attribute("OrderLabel", str, AttributeIndex(IndexType.KEYWORD))
    amount = Attribute("amount", int, AttributeIndex(IndexType.INT, "OrderAmount"))

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Index())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.label, self.amount)


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [OrderFlow()]
