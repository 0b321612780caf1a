"""The shared conformance suite against the OpenAI Agents SDK adapter."""

import pytest

from dex_agents_conformance import ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory="dex_agents_openai_agents.conformance:build_flow", name="openai-agents"
    )


class TestOpenAIAgentsConformance(ConformanceSuite):
    """Every scenario of the suite, run by ``OpenAIAgentsRunner`` on the local engine."""
