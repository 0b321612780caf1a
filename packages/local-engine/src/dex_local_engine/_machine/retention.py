"""Retention: closed Flows that closed long enough ago are deleted with everything they kept.

A closed Flow keeps its summary, result, Attributes, history and Stream messages until
a new start of its Flow ID replaces it. With a retention period (``EngineServer(
closed_flow_retention=...)``, ``serve --closed-flow-retention``) the engine deletes the
Flows that closed more than that long ago, in batches of ``PURGE_BATCH`` transitions, so
the database and the engine's memory hold the running Flows plus a bounded tail of
closed ones. A SubFlow whose parent still runs is kept.
"""

from __future__ import annotations

import time

from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.model import Flow

PURGE_BATCH = 500
"""Flows deleted per transaction: a purge never holds the engine for long."""


def due(engine: EngineState, older_than_seconds: float, now: float | None = None) -> list[Flow]:
    """The closed Flows that closed more than ``older_than_seconds`` ago, oldest first."""
    before = (time.time() if now is None else now) - max(0.0, older_than_seconds)
    found = [
        flow
        for flow in engine.flows.values()
        if not flow.running and flow.close_time <= before and not _parent_runs(engine, flow)
    ]
    found.sort(key=lambda flow: flow.close_time)
    return found


def _parent_runs(engine: EngineState, flow: Flow) -> bool:
    if not flow.parent:
        return False
    parent = engine.flows.get(flow.parent.split("\n", 1)[0])
    return parent is not None and parent.running


def purge(engine: EngineState, flows: list[Flow]) -> int:
    """Delete these closed Flows in one transition: their rows, history, Attributes,
    Channel messages, Stream messages and in-memory state. Returns how many."""
    by_type: dict[str, set[str]] = {}
    with engine.tx():
        for flow in flows:
            if flow.running or engine.flows.get(flow.flow_id) is not flow:
                continue  # restarted, or already gone
            engine.forget(flow)
            engine.store.delete_flow(flow.flow_id)
            by_type.setdefault(flow.flow_type, set()).add(flow.flow_id)
        for flow_type, flow_ids in by_type.items():
            engine.streams.forget_flows(flow_type, flow_ids)
    return sum(len(ids) for ids in by_type.values())
