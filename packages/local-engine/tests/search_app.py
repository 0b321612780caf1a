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


class OpenCase(Step[str]):
    """Sets the case's status Attribute, indexed under its own name."""

    def execute(self, context: Context, input: str) -> StepDecision:
        CaseFlow.status.set(context, input)
        return graceful_complete(input)


class CaseFlow(Flow[str]):
    """Its Attribute ``CaseStatus`` is a custom keyword field of the same name."""

    status = Attribute("CaseStatus", str, AttributeIndex(IndexType.KEYWORD))

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(OpenCase())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.status)


class OpenClaim(Step[str]):
    """Sets the claim's state Attribute, indexed under the key ``CaseStatus``."""

    def execute(self, context: Context, input: str) -> StepDecision:
        ClaimFlow.state.set(context, input)
        return dead_end()


class ClaimFlow(Flow[str]):
    """Another Flow type whose Attribute writes the same custom keyword field."""

    state = Attribute("claim_state", str, AttributeIndex(IndexType.KEYWORD, "CaseStatus"))

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(OpenClaim())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.state)


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [OrderFlow(), CaseFlow(), ClaimFlow()]
