"""Reading a Stream after a resume token: right answers, and no walk over old messages."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest

from dex_local_engine._store.streams import first_index_after


@dataclass
class Message:
    seq: int


class CountingLog(list[Message]):
    """A log that counts how many messages a search looks at."""

    looked_at = 0

    def __getitem__(self, index: int) -> Message:  # type: ignore[override]
        self.looked_at += 1
        return super().__getitem__(index)


def log_of(*seqs: int) -> deque[Message]:
    return deque(Message(seq) for seq in seqs)


@pytest.mark.parametrize(
    ("seqs", "after", "expected"),
    [
        ((), 0, None),
        ((1, 2, 3), 3, None),
        ((1, 2, 3), 7, None),
        ((1, 2, 3), 0, 0),
        ((1, 2, 3), 1, 1),
        ((1, 2, 3), 2, 2),
        ((5, 6, 9), 2, 0),  # older messages were trimmed: the oldest retained one
        ((5, 6, 9), 7, 2),  # a gap in the retained numbers
        ((4,), 3, 0),
    ],
)
def test_first_index_after(seqs: tuple[int, ...], after: int, expected: int | None) -> None:
    assert first_index_after(log_of(*seqs), after) == expected


def test_a_follower_looks_only_at_the_newest_messages() -> None:
    log = CountingLog(Message(seq) for seq in range(1, 10_001))
    assert first_index_after(log, 9_998) == 9_998
    assert log.looked_at <= 4
    log.looked_at = 0
    assert first_index_after(log, 10_000) is None
    assert log.looked_at == 1


def _pages_through_a_store(retained: list[int], page_size: int) -> list[list[int]]:
    """Every page of a Stream whose retained messages have ``retained`` numbers."""
    from dex.dexpb import dex_pb2 as pb

    from dex_local_engine._store.store import Store
    from dex_local_engine._store.streams import StreamStore

    streams = StreamStore(Store(":memory:"))
    for _ in range(max(retained, default=0)):
        streams.write(
            flow_type="T", stream="s", flow_id="f", value=pb.Value(), capacity=0, source="t"
        )
    for log in streams._logs.values():  # pyright: ignore[reportPrivateUsage]
        log.messages = deque(m for m in log.messages if m.seq in set(retained))
    pages: list[list[int]] = []
    token = ""
    while True:
        page, token = streams.page("T", "s", "f", page_size, token)
        pages.append([int(m.resume_token) for m in page])
        if not token:
            return pages


@pytest.mark.parametrize(
    ("retained", "page_size", "expected"),
    [
        ([], 2, [[]]),
        ([1, 2, 3, 4, 5], 2, [[5, 4], [3, 2], [1]]),
        ([1, 2, 3, 4], 2, [[4, 3], [2, 1]]),
        ([1, 2, 3], 5, [[3, 2, 1]]),
        ([2, 5, 6, 9], 3, [[9, 6, 5], [2]]),  # gaps left by trimming
    ],
)
def test_pages_go_newest_first_through_every_retained_message(
    retained: list[int], page_size: int, expected: list[list[int]]
) -> None:
    assert _pages_through_a_store(retained, page_size) == expected
