"""What an adapter hands the suite: its scenario factory and what its framework can do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Capability(StrEnum):
    """Optional abilities; a scenario that needs one an adapter lacks is skipped with a reason."""

    PARALLEL_TOOL_CALLS = "parallel_tool_calls"
    """The test model can ask for several tool calls in one response."""
    REJECTION_MESSAGE_TO_MODEL = "rejection_message_to_model"
    """A rejection's message reaches the model as the call's result."""
    FAILING_MODEL_CALLS = "failing_model_calls"
    """The test model can raise an unexpected error on chosen attempts (``fail_attempts``)."""
    GATED_MODEL_CALLS = "gated_model_calls"
    """The test model can block on a ``FileGate`` (and stream text before it)."""
    BUILT_IN_TOOLS = "built_in_tools"
    """The factory enables the scenario's built-in tools (``ScenarioSession.built_in_tools``)."""
    UNOFFERED_TOOL_CALLS = "unoffered_tool_calls"
    """The framework passes on a call of a tool the model call did not offer (a planning
    turn's other tools, or a tool the runner does not have); some frameworks fail the
    model call instead."""
    PLAN_MODE = "plan_mode"
    """The runner declares ``supports_plan_mode``: a planning turn offers only ``write_todos``."""
    COMPACTION = "compaction"
    """The runner implements the compaction methods and the factory passes
    ``ScenarioSession.compaction_context_window_tokens``, ``retained_message_limit`` and
    ``summary_gate`` on; opt-in, so not in ``ALL_CAPABILITIES``."""
    TOOL_TASKS = "tool_tasks"
    """A ``STARTS_TASK`` scenario tool starts a tool task (it raises ``StartedToolTask``) and
    the factory polls it with ``ScenarioTaskPoller`` (the adapters' ``tool_tasks=``);
    opt-in, so not in ``ALL_CAPABILITIES``."""
    TOOL_INPUT_REQUESTS = "tool_input_requests"
    """The framework's tools can return ``ToolInputRequested`` and read the answers and the
    continuation of a rerun (``scenario_tool_outcome(..., input_answers=,
    input_continuation=)``); opt-in, so not in ``ALL_CAPABILITIES``."""
    PLANNING_TOOL_CHOICE = "planning_tool_choice"
    """The factory passes ``ScenarioSession.planning_tool_choice`` to the runner, and the
    scripted model records the tools it offered and its tool choice
    (``play_scripted_model_call(offered_tools=, tool_choice=)``); opt-in."""
    SESSION_MODELS = "session_models"
    """The runner chooses its model per session from ``turn.session_settings``: the factory
    builds one scripted model per ``ScenarioSession.session_models`` name plus the default
    and maps the settings to one with ``scenario_model_name``; the scripted model records
    its name (``play_scripted_model_call(model=)``, ``play_scripted_summary(model=)``);
    opt-in."""
    MCP_TOOLS = "mcp_tools"
    """The factory offers the tools of ``ScenarioSession.mcp_server_url`` through the
    adapter's MCP wrapping (``scenario_mcp_tools`` in ``dex_agents.testing.mcp_server``)
    and makes their source the tool task poller of those tools, so an MCP task is polled
    in ``PollToolTask``, its input requests become questions and ``cancel_turn`` cancels
    it; needs the ``mcp`` and ``otel`` extras of ``dex-agents``; opt-in."""


OPT_IN_CAPABILITIES = frozenset(
    {
        Capability.MCP_TOOLS,
        Capability.COMPACTION,
        Capability.TOOL_TASKS,
        Capability.TOOL_INPUT_REQUESTS,
        Capability.PLANNING_TOOL_CHOICE,
        Capability.SESSION_MODELS,
    }
)
"""Capabilities an adapter names itself; ``ALL_CAPABILITIES`` leaves them out."""
ALL_CAPABILITIES = frozenset(c for c in Capability if c not in OPT_IN_CAPABILITIES)
"""Every capability but the opt-in ones (``COMPACTION``, ``TOOL_TASKS``,
``TOOL_INPUT_REQUESTS``, ``PLANNING_TOOL_CHOICE``, ``SESSION_MODELS``, ``MCP_TOOLS``)."""


def _no_reasons() -> dict[Capability, str]:
    return {}


@dataclass(frozen=True)
class ConformanceAdapter:
    """An adapter under test.

    ``factory`` is the import path (``package.module:function``) of a scenario
    factory ``(script, tools, state_directory, session) -> Flow``; Worker child
    processes import it to build the same Flow as the test. ``name`` appears in
    failure messages. ``capabilities`` lists what the adapter's test model and
    tools support; by default all. ``unsupported`` gives the reason for a capability the
    adapter lacks on purpose (what its framework cannot do, and what a user gets
    instead); a scenario that needs it skips with that reason.
    """

    factory: str
    name: str = "adapter"
    capabilities: frozenset[Capability] = ALL_CAPABILITIES
    unsupported: Mapping[Capability, str] = field(default_factory=_no_reasons)

    def __post_init__(self) -> None:
        module, separator, attribute = self.factory.partition(":")
        if not separator or not module or not attribute:
            raise ValueError(f"factory must be 'module:function', got {self.factory!r}")
        object.__setattr__(self, "capabilities", frozenset(self.capabilities))
        reasons = dict(self.unsupported)
        for capability, reason in reasons.items():
            if capability in self.capabilities:
                raise ValueError(
                    f"{capability.value} is both in capabilities and unsupported; pick one"
                )
            if not isinstance(reason, str) or not reason.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError(f"the reason {capability.value} is unsupported must be text")
        object.__setattr__(self, "unsupported", reasons)

    def skip_reason(self, capabilities: list[Capability]) -> str | None:
        """Why a scenario that needs ``capabilities`` skips, or ``None`` when it runs."""
        missing = [c for c in capabilities if c not in self.capabilities]
        if not missing:
            return None
        reasons = [
            f"{c.value} ({self.unsupported[c]})" if c in self.unsupported else c.value
            for c in missing
        ]
        return f"{self.name} does not support {', '.join(reasons)}"
