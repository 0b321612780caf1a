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

The tool runs as the one node of a small graph, so LangGraph's own
``langgraph.types.interrupt(value)`` asks the user from inside it: the first run
stops there and the session asks the question (``ToolInputRequested``); the rerun
resumes the node with each answer in turn (``Command(resume=...)`` on an in-memory
checkpointer that lives for that Step), so each ``interrupt()`` returns its answer.
The code before an ``interrupt()`` runs again on the rerun, as LangGraph always
does: ask before the tool takes any effect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, TypeVar, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt
from pydantic import BaseModel, ValidationError

from dex_agents import ToolEffect
from dex_agents.runner import (
    DEX_EFFECT_METADATA_KEY,
    DEX_IDEMPOTENCY_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    AgentTurnContext,
    DeferredToolExecution,
    DeferredToolOutcome,
    ResolvedToolPolicy,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    call_policy,
    declared_approval_in,
    declared_effect_in,
    enabled_builtin_tool_definitions,
    forced_tool_choice_refusal,
    is_anthropic_model,
    known_tool,
    serving_deferred_tool_execution,
    thinking_enabled,
    tool_arguments_object,
    tool_declaration_metadata,
)
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
    "tool_input_requested",
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
    ``ToolExecutionError``, and an ``interrupt()`` without its answer yet returns
    ``ToolInputRequested``."""
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
            result = await _run_in_tool_graph(tool, tool_call, config, call.input_answers)
    except ToolException as error:
        raise ToolExecutionError(str(error) or type(error).__name__) from error
    if isinstance(result, Interrupt):
        return tool_input_requested(record.tool_name, result.value)
    if not isinstance(result, ToolMessage):
        raise TypeError(
            f"tool {record.tool_name} returned {type(result).__name__}, not a result;"
            " tools that return a LangGraph Command are not supported"
        )
    output = _tool_output(result)
    if result.status == "error":
        raise ToolExecutionError(output)
    return ToolExecutionResult(output)


class _ToolState(TypedDict, total=False):
    result: Any


_INTERRUPT_KEY = "__interrupt__"
_TOOL_NODE = "tool"


async def _run_in_tool_graph(
    tool: BaseTool,
    tool_call: Mapping[str, Any],
    call_config: RunnableConfig,
    answers: Sequence[str],
) -> Any:
    """The tool's result (a ``ToolMessage``), or the ``Interrupt`` it stopped at.

    The tool runs as the node of a one-node graph, so ``interrupt()`` works in it. With
    answers the graph gets an in-memory checkpointer and is resumed once per answer, in
    order, so each ``interrupt()`` of the tool returns its answer.
    """

    async def run_tool(state: _ToolState, config: RunnableConfig) -> dict[str, Any]:
        del state
        # The node's config carries LangGraph's runtime (what interrupt() reads); the
        # call's carries its idempotency key and execution.
        return {"result": await tool.ainvoke(dict(tool_call), merge_configs(config, call_config))}

    builder = StateGraph(_ToolState)
    builder.add_node(_TOOL_NODE, run_tool)  # pyright: ignore[reportUnknownMemberType]
    builder.add_edge(START, _TOOL_NODE)
    builder.add_edge(_TOOL_NODE, END)
    checkpointer = InMemorySaver() if answers else None
    graph = builder.compile(checkpointer=checkpointer, name="dex_agents_tool_step")  # pyright: ignore[reportUnknownMemberType]
    run_config = RunnableConfig(configurable={"thread_id": "tool-step"})
    state: Mapping[str, Any] = await graph.ainvoke({}, run_config)  # pyright: ignore[reportUnknownMemberType]
    for answer in answers:
        if not state.get(_INTERRUPT_KEY):
            break
        state = await graph.ainvoke(Command(resume=answer), run_config)  # pyright: ignore[reportUnknownMemberType]
    interrupts = cast(Sequence[Interrupt], state.get(_INTERRUPT_KEY) or ())
    if interrupts:
        return interrupts[0]
    return state.get("result")


def tool_input_requested(tool_name: str, value: object) -> ToolInputRequested:
    """The question of a tool's ``interrupt(value)``.

    ``value`` is the question text, or a mapping with ``question`` and optional
    ``choices`` (a list of texts), ``allows_free_text`` (a bool) and ``continuation``
    (text the rerun reads in ``tool_call.input_continuation``).
    """
    if isinstance(value, str):
        return ToolInputRequested(value)
    if isinstance(value, Mapping):
        fields = cast(Mapping[str, Any], value)
        question = fields.get("question")
        choices = fields.get("choices")
        allows_free_text = fields.get("allows_free_text", True)
        continuation = fields.get("continuation")
        unknown = sorted(set(fields) - {"question", "choices", "allows_free_text", "continuation"})
        if (
            isinstance(question, str)
            and question.strip()
            and not unknown
            and (choices is None or _is_text_list(choices))
            and isinstance(allows_free_text, bool)
            and (continuation is None or isinstance(continuation, str))
        ):
            return ToolInputRequested(
                question,
                choices=tuple(cast(list[str], choices)) if choices is not None else None,
                allows_free_text=allows_free_text,
                continuation=continuation,
            )
    # Not a ToolExecutionError: a tool that asks wrongly is a defect, retried by effect.
    raise TypeError(
        f"tool {tool_name} called interrupt() with {value!r}; the session asks the user a"
        " question: pass its text, or a dict with 'question' and optional 'choices' (a list"
        " of texts), 'allows_free_text' (a bool) and 'continuation' (text)"
    )


def _is_text_list(value: object) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(item, str) for item in cast(Sequence[object], value)
    )


def chat_model_forced_tool_choice_refusal(model: object) -> str | None:
    """Why a LangChain chat model refuses a forced tool choice, or ``None`` when it is not
    known to: its ``model_name`` or ``model`` (Claude Opus 5.5 and Sonnet 5.5), or
    Anthropic extended thinking in its ``thinking`` or ``model_kwargs``."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    thinking: object = getattr(model, "thinking", None)
    kwargs: object = getattr(model, "model_kwargs", None)
    options: dict[str, Any] = {}
    if isinstance(kwargs, Mapping):
        options.update(cast(Mapping[str, Any], kwargs))
    if thinking is not None:
        options["thinking"] = thinking
    model_id = name if isinstance(name, str) else None
    anthropic = is_anthropic_model(model_id) or type(model).__name__ == "ChatAnthropic"
    return forced_tool_choice_refusal(
        model_id, extended_thinking=anthropic and thinking_enabled(options)
    )


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
