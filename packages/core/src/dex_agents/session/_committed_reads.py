"""Stored messages a Worker has read before, by run: a model Step skips their reads.

Every model Step reads the whole model input: up to a window of messages and every
chunk after the summary, one SDK read each (about 8 µs, so 1-1.5 ms a turn once the
window is full). Within one run of a session Flow a key names one value for good: a
window instance is written once per sequence and a chunk is never rewritten, both
only deleted later (rollover, retention), and a reset starts a new run. So a value
read under a key in a run can stand in for the next read of that key in that run.

Only committed values may enter: what a Step sees before it writes anything is the
state its attempt started from. A Step that read its own pending write through here
and then failed would leave a value that was never stored, so only a Step that reads
before it writes messages uses this (``RunModel`` reads its input first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol, TypeVar

__all__ = ["DEFAULT_COMMITTED_READ_RUNS", "CommittedReads", "read_each"]

ValueT = TypeVar("ValueT")
Kind = Literal["window", "chunk"]

DEFAULT_COMMITTED_READ_RUNS = 1024
"""Session runs whose last reads a Worker keeps; the least recently read go first."""


def read_each(keys: Iterable[str], load: Callable[[str], ValueT]) -> dict[str, ValueT]:
    """The value of each key from ``load``, in order; a key whose ``load`` raises
    ``KeyError`` (deleted in this commit) is left out."""
    values: dict[str, ValueT] = {}
    for key in keys:
        try:
            values[key] = load(key)
        except KeyError:
            continue
    return values


class InRun(Protocol):
    """What names a run: a Dex ``Context`` does."""

    @property
    def flow_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...


class CommittedReads:
    """Per run, the values of the keys its last model Step read, by kind.

    Holds references only (the decode cache holds the values too), at most one
    window and the kept chunks per run. Thread-safe: a Worker may run Steps on
    threads.
    """

    def __init__(self, max_runs: int = DEFAULT_COMMITTED_READ_RUNS) -> None:
        if type(max_runs) is not int or max_runs < 1:
            raise ValueError(f"max_runs must be a positive integer, got {max_runs!r}")
        self.max_runs = max_runs
        self._runs: OrderedDict[tuple[str, str], dict[tuple[Kind, str], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._runs)

    def read(
        self,
        context: InRun,
        kind: Kind,
        keys: Iterable[str],
        load: Callable[[str], ValueT],
    ) -> dict[str, ValueT]:
        """The value of each key, from this run's earlier reads or from ``load``.

        A key whose ``load`` raises ``KeyError`` is left out. The run then keeps the
        values of exactly these keys for ``kind``: a key gone from the Step's view
        (rolled over, deleted) is forgotten.
        """
        run = (context.flow_id, context.run_id)
        with self._lock:
            known = self._runs.get(run)

        def known_or_load(key: str) -> ValueT:
            if known is not None and (kind, key) in known:
                return known[(kind, key)]
            return load(key)

        values = read_each(keys, known_or_load)
        with self._lock:
            entries = self._runs.pop(run, None) or {}
            kept = {entry: value for entry, value in entries.items() if entry[0] != kind}
            kept.update(((kind, key), value) for key, value in values.items())
            self._runs[run] = kept
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
        return values
