"""UI stream tests: one real local engine per module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_local_engine import LocalEngine

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running
