"""Attribute locks held by Step methods and RPCs, per Flow."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dex_local_engine import steps
from dex_local_engine.model import Flow, Phase

if TYPE_CHECKING:
    from dex_local_engine.engine import Engine


def acquire(engine: Engine, flow: Flow, holder: str, keys: Iterable[str]) -> bool:
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


def release(engine: Engine, flow: Flow, holder: str) -> bool:
    """Free every key ``holder`` holds; whether it held any."""
    locks = engine.locks.get(flow.flow_id)
    if not locks:
        return False
    held = [key for key, owner in locks.items() if owner == holder]
    for key in held:
        del locks[key]
    return bool(held)


def wake_lock_waiters(engine: Engine, flow: Flow) -> None:
    """Let Steps waiting for locks try again, in Step order."""
    for step in steps.ordered_steps(flow):
        if step.phase in (Phase.WAIT_FOR_LOCK, Phase.EXECUTE_LOCK):
            steps.advance(engine, flow, step)
