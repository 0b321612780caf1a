"""pytest plugin of the conformance suite (entry point ``pytest11``).

It registers the ``conformance`` marker and provides the fixtures the suite
uses: ``conformance_engine`` (one private engine per test module) and
``conformance_harness``. The adapter supplies ``conformance_adapter``.

pytest loads this module in every run where the package is installed, so it
imports the suite's machinery only when a fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dex_agents.testing import PrivateDexEngine
    from dex_agents_conformance.adapter import ConformanceAdapter
    from dex_agents_conformance.harness import ConformanceHarness


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: the shared adapter conformance suite")


@pytest.fixture(scope="module")
def conformance_engine(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrivateDexEngine]:
    """A private Dex engine for the test module (``DEXCLI`` selects ``dexcli dev``)."""
    from dex_agents.testing import PrivateDexEngine

    with PrivateDexEngine.start(tmp_path_factory.mktemp("conformance-engine")) as engine:
        yield engine


@pytest.fixture
def conformance_harness(
    conformance_adapter: ConformanceAdapter,
    conformance_engine: PrivateDexEngine,
    tmp_path: Path,
) -> ConformanceHarness:
    """The harness that runs scenarios for ``conformance_adapter`` on the module's engine."""
    from dex_agents_conformance.adapter import ConformanceAdapter
    from dex_agents_conformance.harness import ConformanceHarness

    if not isinstance(conformance_adapter, ConformanceAdapter):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError("the conformance_adapter fixture must return a ConformanceAdapter")
    return ConformanceHarness(conformance_adapter, conformance_engine, tmp_path)
