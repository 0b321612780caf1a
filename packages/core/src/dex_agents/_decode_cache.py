"""Decode a stored text once per Worker process: a bounded cache keyed by the text itself.

Every model Step reads the whole conversation, so without a cache a Worker decodes
message 1 again on every Step of the session, and the cost of a turn grows with
its length. Stored messages are immutable (a sequence is written once; chunks are
never rewritten), and the key is the stored text itself, so a hit can never be
stale: an edited or different message is a different key. Values handed out must
be treated as read-only, or copied by the caller before it changes them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["DEFAULT_DECODE_CACHE_CHARACTERS", "DecodeCache"]

ValueT = TypeVar("ValueT")

DEFAULT_DECODE_CACHE_CHARACTERS = 32 * 1024 * 1024
"""Stored text a cache keeps decoded, in characters (about the bytes of the decoded
values again): enough for the working set of many long sessions."""


class DecodeCache(Generic[ValueT]):
    """Least-recently-used decoded values by stored text, bounded by the texts' length.

    Each entry is keyed by a ``kind`` (the value type's name, so that two types can
    share one cache) and the text. Thread-safe: a Worker may run sync Steps on
    threads next to async ones.
    """

    def __init__(self, max_characters: int = DEFAULT_DECODE_CACHE_CHARACTERS) -> None:
        if max_characters < 0:
            raise ValueError("max_characters must not be negative")
        self.max_characters = max_characters
        self._entries: OrderedDict[tuple[str, str], ValueT] = OrderedDict()
        self._characters = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_decode(
        self, text: str, decode: Callable[[str], ValueT], *, kind: str = ""
    ) -> ValueT:
        """The value of ``text``: the cached one, or ``decode(text)`` (cached when it fits).

        A ``decode`` that raises caches nothing, so a bad text fails every time.
        """
        key = (kind, text)
        with self._lock:
            try:
                value = self._entries[key]
            except KeyError:
                pass
            else:
                self._entries.move_to_end(key)
                self.hits += 1
                return value
        value = decode(text)
        with self._lock:
            self.misses += 1
            self._keep(key, value)
        return value

    def remember(self, text: str, value: ValueT, *, kind: str = "") -> None:
        """Keep ``value`` as the decoded ``text``, when it fits: for a value this process
        just encoded to ``text``, so the Step that reads it next need not decode it."""
        with self._lock:
            self._keep((kind, text), value)

    def _keep(self, key: tuple[str, str], value: ValueT) -> None:
        """Insert or refresh ``key`` and evict the oldest entries past the budget; under
        the lock."""
        size = len(key[1])
        if size > self.max_characters:
            return
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        self._entries[key] = value
        self._characters += size
        while self._characters > self.max_characters:
            (_, evicted), _ = self._entries.popitem(last=False)
            self._characters -= len(evicted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._characters = 0
