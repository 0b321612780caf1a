"""Pure rules of plans in the session: ``write_todos`` in ``RunModel``, planning turns,
``execute_plan`` and the turn that executes an approved plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dex_agents._builtin_tools import WRITE_TODOS
from dex_agents._plans import (
    InvalidTodos,
    next_plan,
    parse_todos,
    plan_updated_payload,
    write_todos_output,
)
from dex_agents._texts import (
    PLANNING_TURN_TOOL_REJECTED,
    WRITE_TODOS_CALLED_TWICE,
    invalid_todos_error,
)
from dex_agents._values import (
    AgentPlan,
    AgentState,
    AgentToolCall,
    AgentToolCallStatus,
    InteractionMode,
    PlanExecutionRequest,
)
from dex_agents.session._changes import SessionChanges
from dex_agents.session._tool_rules import finish_tool_call

__all__ = [
    "SettledCall",
    "accepts_plan_execution",
    "activate_plan",
    "is_current_plan_execution",
    "settle_model_call",
]


@dataclass(frozen=True)
class SettledCall:
    """A call that ``RunModel`` makes final in its own commit; ``plan`` when it wrote one."""

    changes: SessionChanges
    plan: AgentPlan | None = None


def settle_model_call(
    record: AgentToolCall,
    *,
    plan: AgentPlan | None,
    mode: InteractionMode,
    built_in_tools: Sequence[str],
    write_todos_calls: int,
) -> SettledCall | None:
    """Settle a ``write_todos`` call, or any other call of a planning turn; else ``None``.

    ``write_todos`` replaces the plan (revision + 1) and writes ``plan_updated``; a
    response with several fails each; invalid todos fail with ``invalid todos: ...``.
    A planning turn rejects every other call without running it.
    """
    if record.tool_name == WRITE_TODOS and WRITE_TODOS in built_in_tools:
        if write_todos_calls > 1:
            failed = finish_tool_call(
                record, AgentToolCallStatus.FAILED, error=WRITE_TODOS_CALLED_TWICE
            )
            return SettledCall(failed)
        try:
            tasks = parse_todos(record.arguments)
        except InvalidTodos as invalid:
            failed = finish_tool_call(
                record, AgentToolCallStatus.FAILED, error=invalid_todos_error(str(invalid))
            )
            return SettledCall(failed)
        written = next_plan(plan, tasks, mode)
        changes = finish_tool_call(
            record, AgentToolCallStatus.SUCCEEDED, output=write_todos_output(written)
        )
        changes.event("plan_updated", **plan_updated_payload(written))
        return SettledCall(changes, written)
    if mode is InteractionMode.PLANNING:
        rejected = finish_tool_call(
            record, AgentToolCallStatus.REJECTED, rejection_message=PLANNING_TURN_TOOL_REJECTED
        )
        return SettledCall(rejected)
    return None


def accepts_plan_execution(
    request: PlanExecutionRequest,
    *,
    state: AgentState | None,
    plan: AgentPlan | None,
    pending: PlanExecutionRequest | None,
    queued_count: int,
    steered_count: int,
    pending_interrupt_count: int,
) -> bool:
    """``execute_plan``: only while waiting for a message, for the current draft or active
    revision, with no execution pending and nothing queued, steered or pending."""
    if state is None or state.active_turn_id is not None:
        return False
    if plan is None or plan.revision != request.revision or plan.status not in ("draft", "active"):
        return False
    if pending is not None and pending.revision == request.revision:
        return False
    return queued_count == 0 and steered_count == 0 and pending_interrupt_count == 0


def is_current_plan_execution(request: PlanExecutionRequest, plan: AgentPlan | None) -> bool:
    """Whether an approval is of the current plan revision, which is ``draft`` or ``active``."""
    return (
        plan is not None
        and plan.revision == request.revision
        and plan.status in ("draft", "active")
    )


def activate_plan(plan: AgentPlan) -> AgentPlan | None:
    """The plan an approval marks ``active``, or ``None`` when it already is."""
    if plan.status == "draft":
        return replace(plan, status="active")
    return None
