"""The shared conformance suite against a prebuilt ReAct agent stopped before its tools."""

import pytest

from dex_agents_conformance import ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from dex_agents_langgraph.conformance import PREBUILT_CONFORMANCE_FACTORY


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(factory=PREBUILT_CONFORMANCE_FACTORY, name="LangGraph prebuilt agent")


class TestLangGraphPrebuiltConformance(ConformanceSuite):
    """Every scenario of the suite, run by create_react_agent(..., interrupt_before=["tools"])."""
