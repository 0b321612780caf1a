"""``create_stepwise_session_flow``: the session Flow of a Stepwise agent."""

from __future__ import annotations

from typing import Any, Unpack

from dex_agents.session._flow import AgentSessionFlow, create_agent_session_flow
from dex_agents.session._options import AgentSessionOptions, AgentSessionOptionValues
from dex_agents.stepwise._runner import AgentDefinition, StepwiseRunner

__all__ = ["create_stepwise_session_flow", "session_options_of"]


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


def create_stepwise_session_flow(
    definition: AgentDefinition,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **session_options: Unpack[AgentSessionOptionValues],
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs ``definition`` with a ``StepwiseRunner``.

    The session options (tool policies, default effect, built-in tools, interrupt
    deadline, event stream capacity) come from the definition; ``options`` replaces
    them, and keywords such as ``interrupt_deadline=`` override single fields.
    """
    resolved = options if options is not None else session_options_of(definition)
    return create_agent_session_flow(
        StepwiseRunner(definition), flow_type, resolved, **session_options
    )
