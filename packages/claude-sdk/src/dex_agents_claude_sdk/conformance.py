"""The conformance suite's scenario factory for the Claude adapter.

``build_conformance_flow`` serves the neutral ``ModelScript`` from a Messages
API endpoint on ``httpx2.MockTransport`` (``ScriptedMessagesEndpoint``), built
inside the factory so that Worker child processes, which import the factory by
path and read the script from the state directory, build their own:
``dex_agents_claude_sdk.conformance:build_conformance_flow``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dex_agents.session import AgentSessionFlow
from dex_agents.testing import ModelScript, ScenarioSession, ScenarioTaskPoller, ScenarioTool
from dex_agents_claude_sdk import create_claude_session_flow
from dex_agents_claude_sdk.testing import (
    SCRIPTED_MODEL,
    ScriptedMessagesEndpoint,
    mock_client_factory,
    scenario_tool,
)

__all__ = ["CONFORMANCE_FACTORY", "build_conformance_flow"]

CONFORMANCE_FACTORY = "dex_agents_claude_sdk.conformance:build_conformance_flow"
SCRIPTED_MAX_TOKENS = 128


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """A session Flow over the real SDK talking to a scripted Messages endpoint."""
    directory = Path(state_directory)
    return create_claude_session_flow(
        SCRIPTED_MODEL,
        session.flow_type,
        tools=[scenario_tool(tool, directory) for tool in tools],
        client_factory=mock_client_factory(
            ScriptedMessagesEndpoint(script, directory, session.summary_gate)
        ),
        tool_tasks=ScenarioTaskPoller(tools, directory),
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        # The scripted answers are short; a summary call's input budget is the context
        # window less max_tokens, so the scenarios' small windows need a small reply.
        max_tokens=SCRIPTED_MAX_TOKENS,
        **session.storage_options(),
    )
