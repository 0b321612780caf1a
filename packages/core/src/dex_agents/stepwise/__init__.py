"""Stepwise mode: the built-in agent loop, for agents defined in Dex terms.

Declare an ``AgentDefinition`` with function tools and a model client, then
``create_stepwise_session_flow(definition, flow_type)`` builds its
session Flow. Each ``RunModel`` makes at most one model call and each tool call
runs in its own Step.
"""

from __future__ import annotations

from dex_agents.runner import deprecated_aliases
from dex_agents.stepwise._flow import create_stepwise_session_flow, session_options_of
from dex_agents.stepwise._mcp import ToolSource
from dex_agents.stepwise._runner import (
    DEFAULT_MAX_MODEL_CALLS_PER_TURN,
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    AgentDefinition,
    InstructionContext,
    Instructions,
    StepwiseRunner,
)
from dex_agents.stepwise._tools import (
    FunctionTool,
    ToolCallContext,
    declare_tool_effect,
    encode_tool_result,
    function_tool,
)

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "AgentDefinition",
    "FunctionTool",
    "InstructionContext",
    "Instructions",
    "StepwiseRunner",
    "ToolCallContext",
    "ToolSource",
    "create_stepwise_session_flow",
    "declare_tool_effect",
    "encode_tool_result",
    "function_tool",
    "session_options_of",
]

__getattr__ = deprecated_aliases(
    __name__,
    {
        "StepwiseAgentRunner": ("StepwiseRunner", StepwiseRunner),
        "create_stepwise_agent_session_flow": (
            "create_stepwise_session_flow",
            create_stepwise_session_flow,
        ),
    },
)
