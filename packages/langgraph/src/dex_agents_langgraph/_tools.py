"""LangChain tools under the session: what a tool declares, and how its call runs.

A tool declares its effect in its ``metadata`` under ``"dex_effect"`` (a
``ToolEffect`` or its wire value, such as ``"read"``) and may set
``"dex_requires_approval"``. ``declare_tool_effect(tool, effect)`` returns a copy
of a tool that declares both; ``dex_tool_metadata(effect)`` is the metadata for
a tool you build yourself (``StructuredTool.from_function(metadata=...)``). The
session's ``ToolPolicy`` for the tool's name wins over the declaration, and a
tool that declares nothing gets the session's default effect. The keys and the
precedence are the same in every dex-agents adapter (``dex_agents.runner.call_policy``).

A deferred call runs in its tool Step with the real tool (``run_deferred_tool_call``):
the arguments are checked against the tool's schema first, and the tool's ``config``
carries the call's idempotency key and ``DeferredToolExecution`` under
``configurable`` (``idempotency_key_of``, ``tool_execution_of``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.pregel import Pregel
from pydantic import BaseModel, ValidationError

from dex_agents import (
    AgentTurnContext,
    DeferredToolExecution,
    DeferredToolOutcome,
    ResolvedToolPolicy,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
)
from dex_agents.adapter_support import (
    DEX_EFFECT_METADATA_KEY,
    DEX_IDEMPOTENCY_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    declared_approval_in,
    declared_effect_in,
    known_tool,
    serving_deferred_tool_execution,
    tool_arguments_object,
    tool_declaration_metadata,
)
from dex_agents.builtin_tools import enabled_builtin_tool_definitions
from dex_agents.runner import call_policy
from dex_agents_langgraph._messages import message_text

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "DEX_TOOL_EXECUTION_KEY",
    "IDEMPOTENCY_KEY_CONFIG_KEY",
    "declare_tool_effect",
    "declared_approval",
    "declared_effect",
    "dex_tool_metadata",
    "idempotency_key_of",
    "run_deferred_tool_call",
    "tool_call_policy",
    "tool_execution_of",
]

IDEMPOTENCY_KEY_CONFIG_KEY = DEX_IDEMPOTENCY_KEY
"""``config["configurable"]`` key of the call's idempotency key, in a tool's config."""
DEX_TOOL_EXECUTION_KEY = "dex_tool_execution"
"""``config["configurable"]`` key of the whole ``DeferredToolExecution``, in a tool's config."""

ToolT = TypeVar("ToolT", bound=BaseTool)


def dex_tool_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata that declares ``effect`` (and approval, when given) to the session."""
    return tool_declaration_metadata(effect, requires_approval=requires_approval)


def declare_tool_effect(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """A copy of ``tool`` that declares ``effect`` (and approval, when given) in its metadata.

    The tool's other metadata is kept; an earlier ``dex_requires_approval`` is
    dropped unless ``requires_approval`` is given again.
    """
    if not isinstance(tool, BaseTool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool must be a LangChain BaseTool, got {type(tool).__name__}")
    metadata: dict[str, Any] = dict(tool.metadata or {})
    metadata.pop(DEX_REQUIRES_APPROVAL_METADATA_KEY, None)
    metadata.update(tool_declaration_metadata(effect, requires_approval=requires_approval))
    return tool.model_copy(update={"metadata": metadata})


def declared_effect(tool: BaseTool) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, or ``None``."""
    return declared_effect_in(tool.metadata, tool.name)


def declared_approval(tool: BaseTool) -> bool | None:
    """Whether ``tool`` declares that its calls need approval, or ``None`` when it does not say."""
    return declared_approval_in(tool.metadata, tool.name)


def check_tool_declarations(tool: BaseTool) -> None:
    """Raise ``ValueError`` when ``tool``'s metadata holds an invalid declaration."""
    declared_effect(tool)
    declared_approval(tool)


def tool_call_policy(
    turn: AgentTurnContext, tool_name: str, tool: BaseTool | None
) -> ResolvedToolPolicy:
    """The policy of one call (``call_policy``); ``tool`` is the runner's tool of that name."""
    return call_policy(
        turn,
        tool_name,
        known=tool is not None,
        declared_effect=declared_effect(tool) if tool is not None else None,
        declared_approval=declared_approval(tool) if tool is not None else None,
    )


# --- the tool step -----------------------------------------------------------------


def idempotency_key_of(config: RunnableConfig | None) -> str | None:
    """The idempotency key of the tool call running with ``config``, or ``None`` outside dex."""
    value = configurable(config).get(IDEMPOTENCY_KEY_CONFIG_KEY)
    return value if isinstance(value, str) else None


def tool_execution_of(config: RunnableConfig | None) -> DeferredToolExecution | None:
    """The ``DeferredToolExecution`` of the tool call running with ``config``.

    It gives a tool the call's heartbeats, events and heartbeat checkpoint.
    """
    value = configurable(config).get(DEX_TOOL_EXECUTION_KEY)
    return value if isinstance(value, DeferredToolExecution) else None


def configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    """``config["configurable"]``, or ``{}``."""
    if config is None:
        return {}
    return config.get("configurable") or {}


async def run_deferred_tool_call(
    tools: Mapping[str, BaseTool], call: DeferredToolExecution
) -> DeferredToolOutcome:
    """Run ``call`` with the real tool of its name; a failure the model sees raises
    ``ToolExecutionError``."""
    record = call.tool_call
    tool = known_tool(tools, record.tool_name)
    arguments = tool_arguments_object(record.arguments)
    _validate_arguments(tool, arguments)
    config = RunnableConfig(
        metadata={
            "dex_flow_id": call.flow_id,
            "dex_turn_id": record.turn_id,
            "dex_tool_call_id": record.tool_call_id,
            "dex_attempt": call.attempt,
        },
        configurable={
            IDEMPOTENCY_KEY_CONFIG_KEY: call.idempotency_key,
            DEX_TOOL_EXECUTION_KEY: call,
        },
    )
    tool_call = {
        "name": record.tool_name,
        "args": arguments,
        "id": record.tool_call_id,
        "type": "tool_call",
    }
    try:
        with serving_deferred_tool_execution(call):
            result = await tool.ainvoke(tool_call, config)
    except ToolException as error:
        raise ToolExecutionError(str(error) or type(error).__name__) from error
    if not isinstance(result, ToolMessage):
        raise TypeError(
            f"tool {record.tool_name} returned {type(result).__name__}, not a result;"
            " tools that return a LangGraph Command are not supported"
        )
    output = _tool_output(result)
    if result.status == "error":
        raise ToolExecutionError(output)
    return ToolExecutionResult(output)


def tool_list(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """``tools`` as a list; one tool or a string given instead of a sequence is refused."""
    if isinstance(tools, BaseTool | str) or not isinstance(tools, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"tools must be a list of LangChain tools, got {type(tools).__name__}; wrap a"
            " single tool in a list"
        )
    return list(tools)


def tools_of_node(graph: Pregel[Any, Any, Any, Any], node_name: str) -> list[BaseTool]:
    """The tools of a prebuilt agent's ``ToolNode``; ``[]`` when the graph has none."""
    node = graph.nodes.get(node_name)
    if node is None:
        return []
    by_name = getattr(node.bound, "tools_by_name", None)
    if not isinstance(by_name, Mapping):
        raise TypeError(
            f"the graph's {node_name!r} node is not a ToolNode; pass tools= to the runner"
        )
    return list(cast(Mapping[str, BaseTool], by_name).values())


def built_in_tool_schemas(names: Sequence[str]) -> list[dict[str, Any]]:
    """The enabled built-in tools as the OpenAI-style schemas ``bind_tools`` takes."""
    return [
        {
            "type": "function",
            "function": {
                "name": definition.name,
                "description": definition.description,
                "parameters": dict(definition.parameters),
            },
        }
        for definition in enabled_builtin_tool_definitions(names)
    ]


def _validate_arguments(tool: BaseTool, arguments: Mapping[str, Any]) -> None:
    """Check the arguments before the tool runs, so a bad call fails without any effect."""
    schema = tool.tool_call_schema  # the model-facing schema, without injected arguments
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dict(arguments))
        except ValidationError as error:
            raise ToolExecutionError(f"invalid arguments for {tool.name}: {error}") from error


def _tool_output(message: ToolMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return message_text(message) or json.dumps(message.content, ensure_ascii=False)
