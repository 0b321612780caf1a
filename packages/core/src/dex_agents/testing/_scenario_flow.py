"""Scenario Flows: a factory builds a session Flow from a scenario, in any process.

A scenario factory is a function ``(script, tools, state_directory, session) ->
Flow``, named by import path so a Worker child builds the same Flow as the
test. ``build_scripted_flow`` is the core's factory over ``ScriptedRunner``;
adapters write their own over their framework. The Worker child entry is
``python -m dex_agents.testing.scenario_worker module:factory`` with the state
directory in ``DEX_AGENTS_TEST_STATE_DIR``; it reads ``scenario.json`` there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import dex

from dex_agents._contract import ToolPolicy
from dex_agents.session._flow import AgentSessionFlow, create_agent_session_flow
from dex_agents.testing._mcp_scenarios import scenario_mcp_tools
from dex_agents.testing._scripted_runner import ScriptedRunner
from dex_agents.testing._scripts import ModelScript, Scenario, ScenarioSession, ScenarioTool
from dex_agents.testing._worker_process import load_object

ScenarioFlowFactory = Callable[
    [ModelScript, Sequence[ScenarioTool], Path, ScenarioSession], dex.Flow[Any]
]
"""Builds a runner's session Flow for a scenario: its script, tools, state directory and
session options. Each runner's ``conformance.py`` has one."""

SCRIPTED_FLOW_FACTORY = "dex_agents.testing:build_scripted_flow"
"""The scenario factory of the scripted runner (``ScriptedRunner``), by import path."""
STATE_DIRECTORY_VARIABLE = "DEX_AGENTS_TEST_STATE_DIR"
"""The environment variable that gives a Worker child the scenario's state directory."""


def scenario_tool_policies(tools: Sequence[ScenarioTool]) -> dict[str, ToolPolicy]:
    """Session tool policies that give each scenario tool its declared effect and approval.

    A scenario factory should not pass these: they override the framework's own
    declarations, which the suite's ``framework_effects`` scenario checks. They
    suit a test that wants the session's policy on purpose.
    """
    return {tool.name: ToolPolicy(tool.effect, tool.requires_approval) for tool in tools}


def build_scripted_flow(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """The core's scenario factory: a session Flow over ``ScriptedRunner``.

    It sets no session ``tool_policies``: the runner declares each scenario tool's
    effect and approval itself, as a framework does, and the suite checks that
    those declarations reach the session.
    """
    return create_agent_session_flow(
        ScriptedRunner(
            script,
            tools,
            state_directory,
            planning_tool_choice=session.planning_tool_choice,
            session_models=session.session_models,
            mcp_tools=scenario_mcp_tools(session),
        ),
        session.flow_type,
        interrupt_deadline=session.interrupt_deadline,
        built_in_tools=session.built_in_tools,
        plan_mode_enabled=session.plan_mode_enabled,
        question_supersedes_later_calls=session.question_supersedes_later_calls,
    )


def load_scenario_factory(factory_path: str) -> ScenarioFlowFactory:
    """The scenario factory at ``factory_path`` (``"module:attribute"``), checked callable."""
    factory = load_object(factory_path)
    if not callable(factory):
        raise TypeError(f"{factory_path} is not callable")
    return cast(ScenarioFlowFactory, factory)


def build_scenario_flow(factory_path: str, state_directory: Path) -> dex.Flow[Any]:
    """Read the scenario in ``state_directory`` and build its Flow with the named factory."""
    scenario = Scenario.read(state_directory)
    flow = load_scenario_factory(factory_path)(
        scenario.script, scenario.tools, state_directory, scenario.session
    )
    if not isinstance(flow, dex.Flow):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{factory_path} returned {type(flow).__name__}, not a dex.Flow")
    if flow.get_flow_type() != scenario.session.flow_type:
        raise ValueError(
            f"{factory_path} built Flow type {flow.get_flow_type()!r};"
            f" the scenario asks for {scenario.session.flow_type!r}"
        )
    return flow
