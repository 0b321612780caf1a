"""The shared conformance suite against the core's scripted runner (``ScriptedRunner``)."""

import pytest

from dex_agents.testing import SCRIPTED_FLOW_FACTORY
from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=SCRIPTED_FLOW_FACTORY,
        name="core ScriptedRunner",
        capabilities=ALL_CAPABILITIES
        | {
            Capability.TOOL_TASKS,
            Capability.TOOL_INPUT_REQUESTS,
            Capability.PLANNING_TOOL_CHOICE,
            Capability.SESSION_MODELS,
            Capability.MCP_TOOLS,
        },
        # ScriptedRunner implements no compaction methods.
        unsupported={Capability.COMPACTION: "ScriptedRunner has no summarize_context"},
    )


class TestScriptedRunnerConformance(ConformanceSuite):
    """Every scenario of the suite, run by ``ScriptedRunner`` on the local engine."""
