"""The dex-agents conformance suite against this adapter, through the pytest plugin."""

import pytest

from dex_agents_conformance import ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from minimal_adapter.conformance import CAPABILITIES, UNSUPPORTED


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory="minimal_adapter.conformance:build_flow",
        name="minimal adapter",
        capabilities=CAPABILITIES,
        unsupported=UNSUPPORTED,
    )


class TestMinimalAdapterConformance(ConformanceSuite):
    """Every scenario of the suite, run by ChatRunner over httpx.MockTransport."""
