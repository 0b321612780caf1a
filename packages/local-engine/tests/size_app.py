"""Flows for the size limit tests: values written by RPCs, and a Step that loads them all."""

from __future__ import annotations

import uuid
from typing import Any

from dex import (
    AttributeMap,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    graceful_complete,
    rpc,
)

blobs = AttributeMap("blobs", str)
go = Channel("go", str)


class LoadAll(Step[str]):
    """Waits for ``go``, then loads every blob: its task grows with what the RPCs stored."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_load_attribute_maps=(blobs,))

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.any_of(go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        keys = blobs.get_all_instance_keys(context)
        total = sum(len(blobs.get(context, key)) for key in keys)
        return graceful_complete(f"{input}:{total}")


class SizeFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(LoadAll())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(blobs, go)

    @rpc
    def put(self, context: Context, size: int) -> RPCResult[int]:
        key = uuid.uuid4().hex
        blobs.set(context, key, "x" * size)
        return RPCResult(size)

    @rpc
    def echo(self, context: Context, text: str) -> RPCResult[int]:
        return RPCResult(len(text))

    @rpc
    def release(self, context: Context) -> RPCResult[bool]:
        go.publish(context, "go")
        return RPCResult(True)


def flows() -> list[Flow[Any]]:
    return [SizeFlow()]
