"""The conformance suite's scenario factory for the LangGraph adapter.

``build_conformance_flow`` turns a neutral ``ModelScript`` into a
``ScriptedChatModel`` and the scenario's tools into LangChain tools that declare
their effects, and builds the session Flow with the runner's one-node graph.
Worker child processes import it by path:
``dex_agents_langgraph.conformance:build_conformance_flow``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dex_agents.session import AgentSessionFlow
from dex_agents.testing import ModelScript, ScenarioSession, ScenarioTaskPoller, ScenarioTool
from dex_agents_langgraph import create_langgraph_session_flow
from dex_agents_langgraph.testing import ScriptedChatModel, scenario_tool

__all__ = [
    "CONFORMANCE_FACTORY",
    "PREBUILT_CONFORMANCE_FACTORY",
    "build_conformance_flow",
    "build_prebuilt_conformance_flow",
]

CONFORMANCE_FACTORY = "dex_agents_langgraph.conformance:build_conformance_flow"
PREBUILT_CONFORMANCE_FACTORY = "dex_agents_langgraph.conformance:build_prebuilt_conformance_flow"


def build_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """A session Flow over a scripted LangChain chat model and the scenario's tools."""
    directory = Path(state_directory)
    session = _scaled_to_text_tokens(session)
    return create_langgraph_session_flow(
        ScriptedChatModel(
            script=script, state_directory=directory, summary_gate=session.summary_gate
        ),
        session.flow_type,
        tools=[scenario_tool(tool, directory) for tool in tools],
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        tool_tasks=ScenarioTaskPoller(tools, directory),
        **session.storage_options(),
    )


TEXT_TO_JSON_TOKENS = 3
"""About how many times more tokens the stored JSON of a short scripted message counts
(the estimate of Stepwise, which sizes the scenarios' context windows) than LangChain's
``count_tokens_approximately`` of its text does."""


def _scaled_to_text_tokens(session: ScenarioSession) -> ScenarioSession:
    """The scenario's context window in the tokens LangChain counts, so the same few short
    turns fill it."""
    window = session.compaction_context_window_tokens
    if window is None:
        return session
    return replace(session, compaction_context_window_tokens=max(1, window // TEXT_TO_JSON_TOKENS))


def build_prebuilt_conformance_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The same scenario through LangGraph's prebuilt ReAct agent, stopped before its tools."""
    directory = Path(state_directory)
    langchain_tools = [scenario_tool(tool, directory) for tool in tools]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's
        from langgraph.prebuilt import create_react_agent  # pyright: ignore[reportDeprecated, reportUnknownVariableType]

        graph = create_react_agent(  # pyright: ignore[reportDeprecated, reportUnknownVariableType, reportUnknownMemberType]
            ScriptedChatModel(script=script, state_directory=directory),
            langchain_tools,
            # An agent without tools has no tools node to stop before.
            interrupt_before=["tools"] if langchain_tools else None,
        )
    return create_langgraph_session_flow(
        graph,  # pyright: ignore[reportUnknownArgumentType]
        session.flow_type,
        # pyright: ignore[reportUnknownArgumentType]
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
        tool_tasks=ScenarioTaskPoller(tools, Path(state_directory)),
    )
