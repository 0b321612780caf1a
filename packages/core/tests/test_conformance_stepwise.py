"""The shared conformance suite against the Stepwise runner (``StepwiseRunner``)."""

import pytest

from dex_agents.stepwise.conformance import STEPWISE_FLOW_FACTORY
from dex_agents_conformance import ConformanceAdapter
from dex_agents_conformance.adapter import ALL_CAPABILITIES, Capability
from dex_agents_conformance.suite import ConformanceSuite


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=STEPWISE_FLOW_FACTORY,
        name="Stepwise",
        capabilities=ALL_CAPABILITIES
        | {
            Capability.COMPACTION,
            Capability.TOOL_TASKS,
            Capability.TOOL_INPUT_REQUESTS,
            Capability.PLANNING_TOOL_CHOICE,
            Capability.SESSION_MODELS,
            Capability.MCP_TOOLS,
        },
    )


class TestStepwiseConformance(ConformanceSuite):
    """Every scenario of the suite, run by the Stepwise loop on the local engine."""
