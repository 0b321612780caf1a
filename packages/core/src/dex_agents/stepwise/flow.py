"""``create_stepwise_agent_session_flow``: the session Flow of a Stepwise agent."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dex_agents.session import AgentSessionFlow, create_agent_session_flow
from dex_agents.session.options import AgentSessionOptions
from dex_agents.stepwise.definition import AgentDefinition
from dex_agents.stepwise.runner import StepwiseAgentRunner
from dex_agents.tracing.options import TracingOptions

__all__ = ["create_stepwise_agent_session_flow", "session_options_of"]


def session_options_of(definition: AgentDefinition) -> AgentSessionOptions:
    """The session options an ``AgentDefinition`` implies."""
    options: dict[str, Any] = {
        "tool_policies": dict(definition.tool_policies),
        "default_tool_effect": definition.default_tool_effect,
        "interrupt_deadline": definition.interrupt_deadline,
        "built_in_tools": tuple(definition.built_in_tools),
        "plan_mode_enabled": definition.plan_mode_enabled,
    }
    if definition.compaction is not None:
        options["compaction"] = definition.compaction
    if definition.event_stream_capacity_bytes is not None:
        options["event_stream_capacity_bytes"] = definition.event_stream_capacity_bytes
    return AgentSessionOptions(**options)


def create_stepwise_agent_session_flow(
    definition: AgentDefinition, flow_type: str, *, tracing: TracingOptions | None = None
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs ``definition`` with a ``StepwiseAgentRunner``.

    The session options (tool policies, default effect, built-in tools, interrupt
    deadline, event stream capacity) come from the definition; ``tracing`` configures
    the session's OpenTelemetry spans.
    """
    options = replace(session_options_of(definition), tracing=tracing)
    return create_agent_session_flow(StepwiseAgentRunner(definition), flow_type, options)
