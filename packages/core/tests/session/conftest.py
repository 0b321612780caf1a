"""Session integration fixtures: a real local engine per module and a harness factory."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import dex
import pytest

from dex_local_engine import LocalEngine

sys.path.insert(0, str(Path(__file__).parent))

from core_session_support import Harness


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


@pytest.fixture
async def harness_factory(engine: LocalEngine) -> AsyncIterator[Callable[..., Harness]]:
    opened: list[Harness] = []

    def make(*flows: dex.Flow[Any], session_codecs: bool = True) -> Harness:
        harness = Harness(engine.address, flows, session_codecs=session_codecs)
        opened.append(harness)
        return harness

    return make
