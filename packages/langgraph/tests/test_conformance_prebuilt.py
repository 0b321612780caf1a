"""The shared conformance suite against a prebuilt ReAct agent stopped before its tools."""

import pytest

from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.suite import ConformanceSuite
from dex_agents_langgraph.conformance import PREBUILT_CONFORMANCE_FACTORY

PREBUILT_PLAN_MODE_REASON = (
    "a prebuilt agent graph binds its model to its tools itself, so a planning turn cannot"
    " offer only write_todos; pass the chat model and tools instead"
    " (create_langgraph_session_flow(model, tools=...)), whose one-node graph plans"
)


@pytest.fixture
def conformance_adapter() -> ConformanceAdapter:
    return ConformanceAdapter(
        factory=PREBUILT_CONFORMANCE_FACTORY,
        name="LangGraph prebuilt agent",
        capabilities=(ALL_CAPABILITIES - {Capability.PLAN_MODE})
        | {
            Capability.TOOL_TASKS,
            Capability.COMPACTION,
            Capability.TOOL_INPUT_REQUESTS,
            Capability.SESSION_MODELS,
            Capability.MCP_TOOLS,
        },
        unsupported={
            Capability.PLAN_MODE: PREBUILT_PLAN_MODE_REASON,
            Capability.PLANNING_TOOL_CHOICE: PREBUILT_PLAN_MODE_REASON,
        },
    )


class TestLangGraphPrebuiltConformance(ConformanceSuite):
    """Every scenario of the suite, run by create_react_agent(..., interrupt_before=["tools"])."""
