"""Attribute locks held by Step methods and RPCs, per Flow.

A Step waits for its locks (``steps`` serves the waiters, in Step order); an RPC fails
fast instead. Taking and freeing them here changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.model import Flow


def acquire(engine: EngineState, flow: Flow, holder: str, keys: Iterable[str]) -> bool:
    """Take every key for ``holder``, or none when another holder has one."""
    wanted = list(keys)
    if not wanted:
        return True
    locks = engine.locks.setdefault(flow.flow_id, {})
    if any(locks.get(key, holder) != holder for key in wanted):
        return False
    for key in wanted:
        locks[key] = holder
    return True


def release(engine: EngineState, flow: Flow, holder: str) -> bool:
    """Free every key ``holder`` holds; whether it held any."""
    locks = engine.locks.get(flow.flow_id)
    if not locks:
        return False
    held = [key for key, owner in locks.items() if owner == holder]
    for key in held:
        del locks[key]
    return bool(held)
