"""Pydantic AI tools under the session: what a tool declares, how every call is deferred
in the model step, and how one deferred call runs in its tool Step.

Precedence for each call (``dex_agents.runner.call_policy``): the session's
``ToolPolicy`` for the tool name first, then what the tool declares, then the
session's default effect; a name no toolset listed gets the session default.

A tool declares its effect with ``declare_tool_effect(tool, effect)`` (the same
call in every dex-agents adapter), or, where a decorator builds the tool, with
``metadata=dex_tool_metadata(effect)``: either way the effect is in its Pydantic
AI ``metadata`` under ``"dex_effect"`` (a ``ToolEffect`` or its wire value, such as ``"read"``), and
its approval with Pydantic AI's own ``requires_approval=True`` or under
``"dex_requires_approval"`` (a bool, which wins over ``requires_approval``).
A tool that declares no approval gets the default of its effect: approval for
``non_idempotent_write`` and ``unclassified``, none otherwise. An MCP server's tool
declares its effect through its annotations (``dex_agents_pydantic_ai._mcp``).

While a tool runs, its ``RunContext.metadata`` holds the call's idempotency key under
``IDEMPOTENCY_KEY_METADATA_KEY``, and ``get_deferred_tool_execution()`` (from
``dex_agents``) returns the whole call.

A tool asks the user a question with Pydantic AI's own
``CallDeferred(metadata={"question": ...}, kind="question")``, or with ``ask_user(...)``,
which returns the answer on the rerun and raises that ``CallDeferred`` until there is
one; the tool Step turns the question into ``ToolInputRequested``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, TypeVar, cast

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ToolFailedError,
    ToolRetryError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.models import Model, infer_model
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolDefinition,
    ToolDenied,
)
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.usage import RunUsage
from pydantic_core import SchemaValidator, core_schema

from dex_agents import ToolEffect
from dex_agents.runner import (
    DEX_EFFECT_METADATA_KEY,
    DEX_IDEMPOTENCY_KEY,
    DEX_REQUIRES_APPROVAL_METADATA_KEY,
    AgentTurnContext,
    ResolvedToolPolicy,
    ToolExecutionError,
    ToolInputRequested,
    call_policy,
    declared_approval_in,
    declared_effect_in,
    get_deferred_tool_execution,
    tool_declaration_metadata,
)
from dex_agents_pydantic_ai._mcp import mcp_annotation_effect

__all__ = [
    "DEX_EFFECT_METADATA_KEY",
    "DEX_REQUIRES_APPROVAL_METADATA_KEY",
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "DeferEveryToolCall",
    "RefuseToolDeferral",
    "RunSettingsSeen",
    "ToolAskedTheUser",
    "ask_user",
    "counting_questions",
    "declare_tool_effect",
    "declared_effect",
    "dex_tool_metadata",
    "resolve_call_policy",
    "resolve_model",
    "run_tool_directly",
    "tool_deferred_its_call",
    "tool_question_of",
]

IDEMPOTENCY_KEY_METADATA_KEY = DEX_IDEMPOTENCY_KEY
"""``RunContext.metadata`` key of the call's idempotency key while the tool runs."""


ToolT = TypeVar("ToolT", bound=Tool[Any])


def dex_tool_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, Any]:
    """Tool metadata that declares ``effect`` (and approval, when given) to the session.

    Pass it as ``metadata=`` to ``@agent.tool``, ``Tool(...)`` or a toolset's
    ``tool`` decorator; merge it into metadata of your own with ``|``.
    """
    return tool_declaration_metadata(effect, requires_approval=requires_approval)


def declare_tool_effect(
    tool: ToolT, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> ToolT:
    """A copy of ``tool`` (a ``pydantic_ai.Tool``) that declares ``effect`` (and approval).

    The tool's other metadata is kept; an earlier ``dex_requires_approval`` is
    dropped unless ``requires_approval`` is given again. For tools registered
    with a decorator, pass ``metadata=dex_tool_metadata(effect)`` instead.
    """
    if not isinstance(tool, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool must be a pydantic_ai.Tool, got {type(tool).__name__}")
    metadata: dict[str, Any] = dict(tool.metadata or {})
    metadata.pop(DEX_REQUIRES_APPROVAL_METADATA_KEY, None)
    metadata.update(tool_declaration_metadata(effect, requires_approval=requires_approval))
    declared = copy.copy(tool)
    declared.metadata = metadata
    return declared


def declared_effect(tool: ToolDefinition) -> ToolEffect | None:
    """The effect ``tool`` declares in its metadata, else its MCP annotations, or ``None``.

    An MCP server's tool (``MCPToolset``) carries its annotations in its metadata:
    ``readOnlyHint`` is ``read`` and ``idempotentHint`` is ``idempotent_write``, as in
    ``dex_agents.mcp``; anything else leaves the default effect.
    """
    declared = declared_effect_in(tool.metadata, tool.name)
    if declared is not None:
        return declared
    return mcp_annotation_effect(tool)


def _declared_approval(tool: ToolDefinition) -> bool | None:
    approval = declared_approval_in(tool.metadata, tool.name)
    if approval is not None:
        return approval
    # Pydantic AI marks a tool declared with requires_approval=True as 'unapproved'.
    return True if tool.kind == "unapproved" else None


def resolve_call_policy(
    turn: AgentTurnContext, tool_name: str, declared: ToolDefinition | None
) -> ResolvedToolPolicy:
    """The policy of a call to ``tool_name`` (``call_policy``); ``declared`` is the tool as its
    toolset listed it.

    A name no toolset listed gets the session's policy or default effect: a
    toolset may list it again when the tool Step runs (an MCP server that was
    down), so its call still waits for approval when the default effect asks.
    """
    if declared is None:
        return call_policy(turn, tool_name, known=False)
    return call_policy(
        turn,
        tool_name,
        known=True,
        declared_effect=declared_effect(declared),
        declared_approval=_declared_approval(declared),
    )


# --- every call deferred in the model step ------------------------------------------
#
# Offer the agent's real tools to the model, and defer every call the model makes.
#
# ``DeferEveryToolCall`` is a Pydantic AI capability for one model step. It wraps
# the toolset the agent assembled for the run (its own tools, ``toolsets=``, MCP
# servers and capability toolsets) so each tool keeps its name, description and
# schema, as the real toolset lists them with the run's ``RunContext``, but is
# marked ``external``: Pydantic AI then ends the run with ``DeferredToolRequests``
# instead of running it. Arguments pass through unchecked here; the tool Step
# validates them with the real tool before it runs. The definitions as the real
# toolset declared them (kind, metadata) are kept for the call's policy.

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
    """Capability for one model step: offer every tool, run none; see the comment above.

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
    a message the model sees. A question (``CallDeferred(kind="question")``) goes to
    the session's user instead (``ToolAskedTheUser``).
    """

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        for call in requests.calls:
            if requests.kind(call.tool_call_id) == "question":
                raise ToolAskedTheUser(
                    _question(call.tool_name, requests.metadata.get(call.tool_call_id))
                )
        names = ", ".join(call.tool_name for call in [*requests.calls, *requests.approvals])
        raise tool_deferred_its_call(names)


# --- a tool asks the user -------------------------------------------------------------

_QUESTION_KEYS = frozenset({"question", "choices", "allows_free_text", "continuation"})
_questions_asked: ContextVar[list[int] | None] = ContextVar(
    "dex_agents_pydantic_ai_questions_asked", default=None
)


class ToolAskedTheUser(Exception):
    """A tool's question, on its way out of an agent run to the tool Step."""

    def __init__(self, question: ToolInputRequested) -> None:
        super().__init__(question.question)
        self.question = question


def ask_user(
    question: str,
    *,
    choices: Sequence[str] | None = None,
    allows_free_text: bool = True,
    continuation: str | None = None,
) -> str:
    """Ask the session's user ``question`` from inside a tool, before it takes any effect.

    The first run of the call raises Pydantic AI's ``CallDeferred(kind="question")``,
    which the tool Step hands to the session; the session asks the user and runs the
    call again, and then each ``ask_user`` of the run returns its answer, in order (the
    call's ``input_answers``). A declined question never reruns the call. ``continuation``
    is text the rerun reads in ``get_deferred_tool_execution().tool_call.input_continuation``.
    """
    execution = get_deferred_tool_execution()
    counter = _questions_asked.get()
    index = counter[0] if counter is not None else 0
    if counter is not None:
        counter[0] += 1
    if index < len(execution.input_answers):
        return execution.input_answers[index]
    metadata: dict[str, Any] = {"question": question, "allows_free_text": allows_free_text}
    if choices is not None:
        metadata["choices"] = list(choices)
    if continuation is not None:
        metadata["continuation"] = continuation
    raise CallDeferred(metadata=metadata, kind="question")


class counting_questions:
    """Count the ``ask_user`` calls of one tool run, so each gets the next answer."""

    def __enter__(self) -> None:
        self._token = _questions_asked.set([0])

    def __exit__(self, *exc: object) -> None:
        _questions_asked.reset(self._token)


def tool_question_of(tool_name: str, deferral: CallDeferred) -> ToolInputRequested | None:
    """The question of a ``CallDeferred(kind="question")``, or ``None`` for another deferral."""
    if deferral.kind != "question":
        return None
    return _question(tool_name, deferral.metadata)


def _question(tool_name: str, metadata: Mapping[str, Any] | None) -> ToolInputRequested:
    fields: Mapping[str, Any] = metadata or {}
    question = fields.get("question")
    choices = fields.get("choices")
    allows_free_text = fields.get("allows_free_text", True)
    continuation = fields.get("continuation")
    if (
        isinstance(question, str)
        and question.strip()
        and set(fields) <= _QUESTION_KEYS
        and (choices is None or _is_text_list(choices))
        and isinstance(allows_free_text, bool)
        and (continuation is None or isinstance(continuation, str))
    ):
        return ToolInputRequested(
            question,
            choices=tuple(cast(Sequence[str], choices)) if choices is not None else None,
            allows_free_text=allows_free_text,
            continuation=continuation,
        )
    # Not a ToolExecutionError: a tool that asks wrongly is a defect, retried by effect.
    raise TypeError(
        f"tool {tool_name} raised CallDeferred(kind='question') with metadata {metadata!r};"
        " the session asks the user a question: give 'question' (text) and optional 'choices'"
        " (a list of texts), 'allows_free_text' (a bool) and 'continuation' (text)"
    )


def _is_text_list(value: object) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(item, str) for item in cast(Sequence[object], value)
    )


def tool_deferred_its_call(names: str) -> ToolExecutionError:
    """The failure of a tool that deferred its own call; the session cannot wait for it."""
    return ToolExecutionError(
        f"tool {names} deferred its own call (CallDeferred or ApprovalRequired), which a"
        " session tool call cannot wait for"
    )


# --- one deferred call in its tool Step ---------------------------------------------
#
# Run one deferred tool call through the agent's toolsets, without an agent run.
#
# A tool Step needs only the tool: Pydantic AI's ``ToolManager`` over the agent's
# own toolsets validates the arguments with the tool's schema and validators,
# builds the tool's ``RunContext`` (deps, ``tool_call_id``, ``retry``,
# ``tool_call_approved``, the session's idempotency key in ``metadata``), runs it,
# and turns ``ModelRetry``, invalid arguments and ``ToolFailed`` into the
# ``ToolReturnPart`` the model would have been sent. That is the same result an
# agent run gives, at a fraction of its cost (no capability resolution, no graph,
# no model lookup per run).
#
# The agent run stays the path for what only a run reproduces: an agent with
# capabilities beyond Pydantic AI's defaults (their tool hooks and toolsets are
# resolved per run), a tool the agent's toolsets do not list (Pydantic AI's
# unknown-tool retry names the run's tools), an external tool, and a model given
# by name that cannot be resolved here, and a process that has not yet seen a
# model step's run of the agent (the run's default tool retries, which a tool
# without its own ``max_retries`` gets, are published only on a run's
# ``RunContext``). ``run_tool_directly`` returns ``None`` for those.


@cache
def _default_capability_types() -> frozenset[type]:
    """The capabilities every ``Agent`` has without being given any."""
    return frozenset(type(capability) for capability in Agent().root_capability.capabilities)


def _needs_an_agent_run(agent: Agent[Any, Any]) -> bool:
    defaults = _default_capability_types()
    return any(
        type(capability) not in defaults for capability in agent.root_capability.capabilities
    )


async def run_tool_directly(
    agent: Agent[Any, Any],
    tool_call: ToolCallPart,
    *,
    deps: object,
    model: Model,
    tool_retries: int | None,
    conversation_id: str,
    metadata: dict[str, Any],
) -> ToolReturnPart | None:
    """The return of ``tool_call`` run through ``agent``'s toolsets, or ``None`` when only an
    agent run reproduces it (see the comment above).

    Raises ``UnexpectedModelBehavior`` as a run does when a retry is past the tool's
    ``max_retries``, ``ToolExecutionError`` when the tool defers its own call, and
    ``ToolAskedTheUser`` when it asks a question (``CallDeferred(kind="question")``).
    """
    if tool_retries is None or _needs_an_agent_run(agent):
        return None
    history: list[ModelMessage] = [ModelResponse(parts=[tool_call])]
    ctx = RunContext[Any](
        deps=deps,
        model=model,
        usage=RunUsage(),
        agent=agent,
        messages=history,
        run_step=1,
        max_retries=tool_retries,
        conversation_id=conversation_id,
        metadata=metadata,
    )
    toolset = await CombinedToolset[Any](list(agent.toolsets)).for_run(ctx)
    async with toolset:
        manager = await ToolManager[Any](toolset).for_run_step(ctx)
        tool = manager.get_tool_def(tool_call.tool_name)
        if tool is None or tool.kind == "external":
            return None
        try:
            result = await manager.handle_call(tool_call, approved=True)
        except ToolRetryError as retry:
            part = retry.tool_retry
            if isinstance(part, ToolReturnPart):
                return part
            raise ToolExecutionError(part.model_response()) from retry
        except ToolFailedError as failed:
            return failed.tool_failed
        except CallDeferred as deferral:
            question = tool_question_of(tool_call.tool_name, deferral)
            if question is not None:
                raise ToolAskedTheUser(question) from deferral
            raise tool_deferred_its_call(tool_call.tool_name) from deferral
        except ApprovalRequired as deferral:
            raise tool_deferred_its_call(tool_call.tool_name) from deferral
    return _return_part(tool_call, result)


def _return_part(call: ToolCallPart, result: object) -> ToolReturnPart:
    """The ``ToolReturnPart`` a run records for ``result`` (a ``ToolReturn`` gives its value)."""
    if isinstance(result, ToolDenied):
        return ToolReturnPart(
            tool_name=call.tool_name,
            content=result.message,
            tool_call_id=call.tool_call_id,
            outcome="denied",
        )
    if isinstance(result, ToolReturn):
        returned: ToolReturn[Any] = result  # pyright: ignore[reportUnknownVariableType]
        return ToolReturnPart(
            tool_name=call.tool_name,
            content=returned.return_value,
            tool_call_id=call.tool_call_id,
            metadata=returned.metadata,
        )
    return ToolReturnPart(tool_name=call.tool_name, content=result, tool_call_id=call.tool_call_id)


def resolve_model(agent: Agent[Any, Any]) -> Model | None:
    """The agent's model as a ``Model``, or ``None`` when it has none or it cannot be built."""
    model = agent.model
    if isinstance(model, Model):
        return model
    if model is None:
        return None
    try:
        return infer_model(model)
    except Exception:
        return None
