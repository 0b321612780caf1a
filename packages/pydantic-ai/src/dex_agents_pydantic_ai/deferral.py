"""Offer the agent's real tools to the model, and defer every call the model makes.

``DeferEveryToolCall`` is a Pydantic AI capability for one model step. It wraps
the toolset the agent assembled for the run (its own tools, ``toolsets=``, MCP
servers and capability toolsets) so each tool keeps its name, description and
schema, as the real toolset lists them with the run's ``RunContext``, but is
marked ``external``: Pydantic AI then ends the run with ``DeferredToolRequests``
instead of running it. Arguments pass through unchecked here; the tool Step
validates them with the real tool before it runs. The definitions as the real
toolset declared them (kind, metadata) are kept for the call's policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from dex_agents import ToolExecutionError

__all__ = [
    "DeferEveryToolCall",
    "RefuseToolDeferral",
    "RunSettingsSeen",
    "tool_deferred_its_call",
]

_ANY_JSON = SchemaValidator(schema=core_schema.any_schema())


class _AcceptAnyArguments:
    """An arguments validator that never fails, so no call turns into a retried model request.

    The call keeps the model's arguments as they were; the tool Step validates
    them with the real tool and reports a failure to the model there.
    """

    def validate_json(self, input: str | bytes | bytearray, **kwargs: Any) -> Any:
        try:
            return _ANY_JSON.validate_json(input)
        except ValueError:
            return {}

    def validate_python(self, input: Any, **kwargs: Any) -> Any:
        return input


_ANY_ARGUMENTS = _AcceptAnyArguments()


@dataclass
class RunSettingsSeen:
    """What a model step's run resolved that a tool Step needs and Pydantic AI does not
    publish: the run's default tool retries (``RunContext.max_retries``), which a tool
    without a ``max_retries`` of its own gets."""

    tool_retries: int | None = None


@dataclass
class _DeferringToolset(WrapperToolset[Any]):
    """The wrapped toolset's tools, each marked ``external``; records what it offered."""

    declared: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    run_settings: RunSettingsSeen = field(default_factory=RunSettingsSeen)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        self.run_settings.tool_retries = ctx.max_retries
        self.declared.clear()
        deferred: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            self.declared[name] = tool.tool_def
            deferred[name] = replace(
                tool,
                tool_def=replace(tool.tool_def, kind="external"),
                args_validator=_ANY_ARGUMENTS,
                args_validator_func=None,
                max_retries=0,
            )
        return deferred

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        # Never reached: an external tool's calls end the run as deferred requests.
        raise RuntimeError(f"tool {name} must not run inside the model step")


@dataclass
class DeferEveryToolCall(AbstractCapability[Any]):
    """Capability for one model step: offer every tool, run none; see the module docstring.

    ``declared`` holds the tool definitions as the agent's toolsets declared them
    for the step's model request, by name; ``output_tools`` the names of the
    agent's output tools, whose calls Pydantic AI handles itself.
    """

    declared: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    output_tools: set[str] = field(default_factory=set[str])
    run_settings: RunSettingsSeen = field(default_factory=RunSettingsSeen)

    async def prepare_output_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        self.output_tools.update(tool.name for tool in tool_defs)
        return tool_defs

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _DeferringToolset(toolset, declared=self.declared, run_settings=self.run_settings)


@dataclass
class RefuseToolDeferral(AbstractCapability[Any]):
    """Capability for a tool Step: a tool that defers its own call fails it instead.

    The session already asked for approval when the call's policy needs one, and a
    session tool call has nowhere to wait for an external result, so a tool that
    raises ``CallDeferred`` (or ``ApprovalRequired`` although approved) fails with
    a message the model sees.
    """

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        names = ", ".join(call.tool_name for call in [*requests.calls, *requests.approvals])
        raise tool_deferred_its_call(names)


def tool_deferred_its_call(names: str) -> ToolExecutionError:
    """The failure of a tool that deferred its own call; the session cannot wait for it."""
    return ToolExecutionError(
        f"tool {names} deferred its own call (CallDeferred or ApprovalRequired), which a"
        " session tool call cannot wait for"
    )
