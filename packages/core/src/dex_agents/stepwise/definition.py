"""``AgentDefinition``: a Stepwise agent declared in Dex terms, without a framework."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from dex_agents._builtin_tools import validate_built_in_tool_names
from dex_agents._compaction import CompactionPolicy
from dex_agents._contract import ToolPolicy
from dex_agents._values import AgentPlan, ToolEffect
from dex_agents.models._types import ModelClient, ModelSettings
from dex_agents.stepwise.function_tool import FunctionTool
from dex_agents.stepwise.tool_source import ToolSource

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "AgentDefinition",
    "InstructionContext",
    "Instructions",
]

DEFAULT_MAX_MODEL_CALLS_PER_TURN = 100
DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True, kw_only=True)
class InstructionContext:
    """What an instructions function sees; it runs in every ``RunModel``."""

    flow_id: str
    turn_id: str
    attempt: int
    interaction_mode: str = "chat"
    plan: AgentPlan | None = None
    session_settings: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    """The turn's session settings (``{}`` for none)."""


Instructions = str | Callable[[InstructionContext], "str | Awaitable[str]"]


def _no_policies() -> dict[str, ToolPolicy]:
    return {}


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """A Stepwise agent: instructions, a model client and its tools.

    ``tool_policies`` win over a function tool's own effect and approval.
    After ``max_model_calls_per_turn`` model calls in one turn, the next call
    offers no tools; if the model still asks for tools, the turn ends and each
    call gets ``model_call_limit_result``.
    """

    name: str
    instructions: Instructions
    model: ModelClient
    model_settings: ModelSettings | None = None
    tools: Sequence[FunctionTool] = ()
    tool_sources: Sequence[ToolSource] = ()
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=_no_policies)
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    built_in_tools: Sequence[str] = ()
    max_model_calls_per_turn: int = DEFAULT_MAX_MODEL_CALLS_PER_TURN
    interrupt_deadline: timedelta | None = None
    event_stream_capacity_bytes: int | None = None
    tool_source_listing_timeout: timedelta = DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT
    resolve_model: Callable[[Mapping[str, Any]], ModelClient] | None = None
    """Maps the turn's session settings to the ``ModelClient`` of each model call,
    summary calls and token estimates included; choose only among clients the Worker
    built, because the settings come from the application."""
    compaction: CompactionPolicy | None = None
    """Summarize earlier messages before the input passes the context window."""
    plan_mode_enabled: bool = False
    planning_tool_choice: Literal["auto", "required"] = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("AgentDefinition.name must be a non-blank string")
        if not isinstance(self.instructions, str) and not callable(self.instructions):
            raise TypeError("AgentDefinition.instructions must be a string or a function")
        model: Any = self.model
        if not callable(getattr(model, "generate", None)):
            raise TypeError("AgentDefinition.model must be a ModelClient (with generate)")
        if self.resolve_model is not None and not callable(self.resolve_model):
            raise TypeError("AgentDefinition.resolve_model must be a function of the settings")
        if (
            isinstance(self.max_model_calls_per_turn, bool)
            or not isinstance(self.max_model_calls_per_turn, int)  # pyright: ignore[reportUnnecessaryIsInstance]
            or self.max_model_calls_per_turn < 1
        ):
            raise ValueError("AgentDefinition.max_model_calls_per_turn must be a positive integer")
        if self.model_settings is not None and not isinstance(self.model_settings, ModelSettings):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("AgentDefinition.model_settings must be ModelSettings or None")
        timeout: object = self.tool_source_listing_timeout
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                "AgentDefinition.tool_source_listing_timeout must be a positive timedelta"
            )
        for name in ("tools", "tool_sources", "built_in_tools"):
            value: object = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(f"AgentDefinition.{name} must be a list or tuple")
        if not isinstance(self.tool_policies, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("AgentDefinition.tool_policies must be a mapping of name to ToolPolicy")
        built_ins = validate_built_in_tool_names(self.built_in_tools)
        if self.planning_tool_choice not in ("auto", "required"):
            raise ValueError("AgentDefinition.planning_tool_choice must be 'auto' or 'required'")
        if self.plan_mode_enabled and "write_todos" not in built_ins:
            raise ValueError(
                "AgentDefinition.plan_mode_enabled needs 'write_todos' in built_in_tools"
            )
        names: set[str] = set()
        for tool in self.tools:
            if not isinstance(tool, FunctionTool):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"AgentDefinition.tools holds {tool!r}, not a FunctionTool")
            if tool.name in names:
                raise ValueError(f"two function tools are named {tool.name}")
            if tool.name in built_ins:
                raise ValueError(f"tool {tool.name} uses the name of an enabled built-in tool")
            names.add(tool.name)
        source_names: set[str] = set()
        for source in self.tool_sources:
            source_name: object = getattr(source, "source_name", None)
            if not isinstance(source_name, str) or not callable(
                getattr(source, "list_tools", None)
            ):
                raise TypeError(
                    f"AgentDefinition.tool_sources holds {source!r}, not a ToolSource "
                    "(a source_name and list_tools)"
                )
            if source.source_name in source_names:
                raise ValueError(f"two tool sources are named {source.source_name!r}")
            source_names.add(source.source_name)
        for name in self.tool_policies:
            if name in built_ins:
                raise ValueError(f"built-in tool {name} has a fixed policy; remove its ToolPolicy")
