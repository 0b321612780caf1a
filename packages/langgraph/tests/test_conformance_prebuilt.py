"""The shared conformance suite against a prebuilt ReAct agent stopped before its tools."""

import pytest

from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from dex_agents_langgraph.conformance import PREBUILT_CONFORMANCE_FACTORY


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=PREBUILT_CONFORMANCE_FACTORY,
        name="LangGraph prebuilt agent",
        # No plan mode: see the README's "Steering, cancellation and plans".
        capabilities=(ALL_CAPABILITIES - {Capability.PLAN_MODE}) | {Capability.TOOL_TASKS},
    )


class TestLangGraphPrebuiltConformance(ConformanceSuite):
    """Every scenario of the suite, run by create_react_agent(..., interrupt_before=["tools"])."""
