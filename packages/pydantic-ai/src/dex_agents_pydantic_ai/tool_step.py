"""Run one deferred tool call through the agent's toolsets, without an agent run.

A tool Step needs only the tool: Pydantic AI's ``ToolManager`` over the agent's
own toolsets validates the arguments with the tool's schema and validators,
builds the tool's ``RunContext`` (deps, ``tool_call_id``, ``retry``,
``tool_call_approved``, the session's idempotency key in ``metadata``), runs it,
and turns ``ModelRetry``, invalid arguments and ``ToolFailed`` into the
``ToolReturnPart`` the model would have been sent. That is the same result an
agent run gives, at a fraction of its cost (no capability resolution, no graph,
no model lookup per run).

The agent run stays the path for what only a run reproduces: an agent with
capabilities beyond Pydantic AI's defaults (their tool hooks and toolsets are
resolved per run), a tool the agent's toolsets do not list (Pydantic AI's
unknown-tool retry names the run's tools), an external tool, and a model given
by name that cannot be resolved here, and a process that has not yet seen a
model step's run of the agent (the run's default tool retries, which a tool
without its own ``max_retries`` gets, are published only on a run's
``RunContext``). ``run_tool_directly`` returns ``None`` for those.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic_ai import Agent, RunContext
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
from pydantic_ai.tools import ToolDenied
from pydantic_ai.toolsets import CombinedToolset
from pydantic_ai.usage import RunUsage

from dex_agents import ToolExecutionError
from dex_agents_pydantic_ai.deferral import tool_deferred_its_call

__all__ = ["resolve_model", "run_tool_directly"]


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
    agent run reproduces it (see the module docstring).

    Raises ``UnexpectedModelBehavior`` as a run does when a retry is past the tool's
    ``max_retries``, and ``ToolExecutionError`` when the tool defers its own call.
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
        except (CallDeferred, ApprovalRequired) as deferral:
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
