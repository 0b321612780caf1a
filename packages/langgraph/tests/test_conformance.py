"""The shared conformance suite against the LangGraph runner (scripted LangChain chat model)."""

import pytest

from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from dex_agents_langgraph.conformance import CONFORMANCE_FACTORY


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=CONFORMANCE_FACTORY,
        name="LangGraph",
        # No plan mode: see the README's "Steering, cancellation and plans".
        capabilities=(ALL_CAPABILITIES - {Capability.PLAN_MODE})
        | {Capability.TOOL_TASKS, Capability.COMPACTION},
    )


class TestLangGraphConformance(ConformanceSuite):
    """Every scenario of the suite, run by LangGraphRunner's one-node graph."""
