"""A Flow whose Attributes opt in to Attribute Store sync (test_attribute_stores.py)."""

from __future__ import annotations

from typing import Any

from dex import (
    Attribute,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    dead_end,
    rpc,
)


class Welcome(Step[int]):
    """Grants the starting credits and keeps the Flow running for RPCs."""

    def execute(self, context: Context, input: int) -> StepDecision:
        ProfileFlow.credits.set(context, input)
        return dead_end()


class ProfileFlow(Flow[int]):
    """One Flow per user; four Attributes sync, ``note`` stays in the Flow."""

    display_name = Attribute("display_name", str, sync_to_attribute_store=True)
    credits = Attribute("credits", int, sync_to_attribute_store=True)
    opted_in = Attribute("opted_in", bool, sync_to_attribute_store=True)
    nickname = Attribute("nickname", str, sync_to_attribute_store=True)  # no such column
    note = Attribute("note", str)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Welcome())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(
            self.display_name, self.credits, self.opted_in, self.nickname, self.note
        )

    @rpc
    def rename(self, context: Context, name: str) -> RPCResult[str]:
        self.display_name.set(context, name)
        self.nickname.set(context, name.lower())
        self.note.set(context, f"renamed to {name}")
        return RPCResult(name)

    @rpc
    def clear(self, context: Context) -> RPCResult[None]:
        self.display_name.set(context, None)
        self.opted_in.set(context, None)
        return RPCResult(None)


def flows() -> list[Flow[Any]]:
    """One instance of every Flow here."""
    return [ProfileFlow()]
