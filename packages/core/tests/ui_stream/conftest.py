"""UI stream tests: one real local engine per module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_local_engine import LocalEngine

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def ai_package() -> Path:
    """The npm cache directory holding ``ai`` and the chat scripts (skips without npm)."""
    from browser_tools import install_ai_package

    directory, reason = install_ai_package()
    if directory is None:
        pytest.skip(reason)
    return directory


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running
