"""The shared conformance suite against the OpenAI Agents SDK adapter."""

import pytest

from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from dex_agents_openai_agents.conformance import CONFORMANCE_FACTORY


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=CONFORMANCE_FACTORY,
        name="openai-agents",
        capabilities=ALL_CAPABILITIES
        | {
            Capability.TOOL_TASKS,
            Capability.COMPACTION,
            Capability.TOOL_INPUT_REQUESTS,
            Capability.PLANNING_TOOL_CHOICE,
            Capability.SESSION_MODELS,
            Capability.MCP_TOOLS,
        },
    )


class TestOpenAIAgentsConformance(ConformanceSuite):
    """Every scenario of the suite, run by ``OpenAIAgentsRunner`` on the local engine."""
