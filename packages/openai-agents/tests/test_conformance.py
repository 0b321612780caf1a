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
        # The SDK fails a model call that calls a tool it did not offer.
        capabilities=(ALL_CAPABILITIES - {Capability.UNOFFERED_TOOL_CALLS})
        | {Capability.TOOL_TASKS, Capability.COMPACTION},
    )


class TestOpenAIAgentsConformance(ConformanceSuite):
    """Every scenario of the suite, run by ``OpenAIAgentsRunner`` on the local engine."""
