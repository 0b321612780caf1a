"""The shared conformance suite against the Claude runner (real SDK, scripted Messages endpoint)."""

import pytest

from dex_agents_claude_sdk.conformance import CONFORMANCE_FACTORY
from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=CONFORMANCE_FACTORY,
        name="Claude (anthropic SDK)",
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


class TestClaudeConformance(ConformanceSuite):
    """Every scenario of the suite, run by ClaudeRunner over httpx2.MockTransport."""
