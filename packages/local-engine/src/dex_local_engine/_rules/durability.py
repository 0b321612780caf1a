"""Durability modes: how far a committed transition survives a crash.

Both modes run SQLite in WAL mode and commit every transition (a Step result with
its effects, an RPC result, a Timer firing, a start, a stop) before the engine hands
out the next task or answers the caller. They differ in when SQLite syncs to disk:

- ``PROCESS_CRASH``, the default: ``synchronous=NORMAL``. A commit is in the
  operating system's page cache at once and on disk at the next checkpoint, so it
  survives a crash of the engine process, not a power loss or kernel crash (the last
  transactions before one can be lost; the database stays consistent).
- ``POWER_LOSS``: ``synchronous=FULL``. Every commit waits for an fsync of the WAL,
  so it also survives a power loss, at the cost of one disk sync per transition.

The default is the cheaper mode because the engine serves tests, demos and small
deployments where the process, not the machine, is what fails, and because Dex
Server's own default (ASYNC Step durability) likewise trades the last moments of
Step completions for throughput.
"""

from __future__ import annotations

from enum import Enum


class Durability(Enum):
    """How far a committed transition survives: a process crash or a power loss."""

    PROCESS_CRASH = "process-crash"
    POWER_LOSS = "power-loss"

    @property
    def sqlite_synchronous(self) -> str:
        """The SQLite ``synchronous`` setting of this mode."""
        return "FULL" if self is Durability.POWER_LOSS else "NORMAL"

    @classmethod
    def parse(cls, value: Durability | str) -> Durability:
        """A mode from itself or its name (``process-crash`` or ``power-loss``)."""
        if isinstance(value, Durability):
            return value
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(mode.value for mode in cls)
            raise ValueError(f"unknown durability mode {value!r}: use one of {names}") from None


DEFAULT_DURABILITY = Durability.PROCESS_CRASH
