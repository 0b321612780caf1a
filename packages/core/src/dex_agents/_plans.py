"""Plans: the ``write_todos`` built-in, plan revisions, and the note that shows the model the plan.

Pure functions; the session applies them in ``RunModel`` (``write_todos``) and in
``AwaitUserMessage`` (an approved plan). A runner shows the model
``build_plan_note(turn.plan, turn.interaction_mode)`` before the turn's messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, cast

from dex_agents._values import AgentPlan, InteractionMode, PlanTask

__all__ = [
    "PLAN_NOTE_HEADER",
    "InvalidTodos",
    "build_plan_note",
    "interaction_mode_for_turn",
    "next_plan",
    "parse_todos",
    "plan_updated_payload",
    "write_todos_output",
]

PLAN_NOTE_HEADER = "[Dex] Plan"
TASK_STATUSES = ("pending", "in_progress", "completed")
TaskStatus = Literal["pending", "in_progress", "completed"]


class InvalidTodos(ValueError):
    """The ``todos`` of a ``write_todos`` call are invalid; the message is the reason."""


def parse_todos(arguments: str) -> tuple[PlanTask, ...]:
    """``{ todos: [{ content, status }] }`` as tasks; ``InvalidTodos`` says what is wrong."""
    try:
        data = json.loads(arguments)
    except (TypeError, ValueError):
        raise InvalidTodos("the arguments are not valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidTodos("the arguments must be a JSON object")
    values = cast("dict[str, Any]", data)
    unexpected = sorted(name for name in values if name != "todos")
    if unexpected:
        raise InvalidTodos(f"unexpected argument {unexpected[0]!r}")
    todos = values.get("todos")
    if not isinstance(todos, list):
        raise InvalidTodos("todos must be a list")
    tasks: list[PlanTask] = []
    for index, item in enumerate(cast("list[Any]", todos)):
        if not isinstance(item, dict):
            raise InvalidTodos(f"todos[{index}] must be an object with content and status")
        fields = cast("dict[str, Any]", item)
        extra = sorted(name for name in fields if name not in ("content", "status"))
        if extra:
            raise InvalidTodos(f"todos[{index}] has unexpected field {extra[0]!r}")
        content = fields.get("content")
        if not isinstance(content, str) or not content.strip():
            raise InvalidTodos(f"todos[{index}].content must be a non-blank string")
        status = fields.get("status")
        if status not in TASK_STATUSES:
            raise InvalidTodos(
                f"todos[{index}].status must be one of {', '.join(TASK_STATUSES)}, got {status!r}"
            )
        tasks.append(PlanTask(content=content, status=status))
    return tuple(tasks)


def next_plan(
    current: AgentPlan | None, tasks: Sequence[PlanTask], mode: InteractionMode
) -> AgentPlan:
    """The plan that ``tasks`` write: revision + 1 and its status.

    No tasks is ``cleared``; a planning turn writes a ``draft``; every task completed
    is ``completed``; anything else is ``active``.
    """
    revision = (current.revision if current is not None else 0) + 1
    if not tasks:
        return AgentPlan(revision=revision, status="cleared", tasks=())
    if mode is InteractionMode.PLANNING:
        status: Literal["draft", "active", "completed"] = "draft"
    elif all(task.status == "completed" for task in tasks):
        status = "completed"
    else:
        status = "active"
    return AgentPlan(revision=revision, status=status, tasks=tuple(tasks))


def write_todos_output(plan: AgentPlan) -> str:
    """The result the model sees for a ``write_todos`` call that wrote ``plan``."""
    if plan.status == "cleared":
        data: dict[str, object] = {"status": "cleared", "revision": plan.revision}
    else:
        data = {"status": "updated", "revision": plan.revision, "task_count": len(plan.tasks)}
    return json.dumps(data, separators=(",", ":"))


def plan_updated_payload(plan: AgentPlan) -> dict[str, object]:
    """The ``plan_updated`` event payload."""
    return {"revision": plan.revision, "status": plan.status, "task_count": len(plan.tasks)}


def interaction_mode_for_turn(plan_mode: bool, plan: AgentPlan | None) -> InteractionMode:
    """A message with ``plan_mode``, or any message while a draft exists, starts a planning turn."""
    if plan_mode or (plan is not None and plan.status == "draft"):
        return InteractionMode.PLANNING
    return InteractionMode.CHAT


def build_plan_note(plan: AgentPlan | None, interaction_mode: InteractionMode | str) -> str | None:
    """The note that shows the model the plan, or ``None`` when there is nothing to show.

    A runner adds it as user text before the turn's messages in every model call, so
    the model always sees the latest plan.
    """
    mode = InteractionMode(interaction_mode)
    lines: list[str] = []
    if mode is InteractionMode.PLANNING:
        lines.append(
            f"{PLAN_NOTE_HEADER} mode: this turn plans before anything runs. Write the plan "
            "with write_todos, the only tool of this turn; the user reviews it before it "
            "runs. If you need to ask the user something first, answer in text instead."
        )
    elif mode is InteractionMode.EXECUTING:
        lines.append(
            f"{PLAN_NOTE_HEADER} execution: the user approved the plan below. Work through "
            "it and keep the task statuses current with write_todos."
        )
    if plan is not None and plan.status != "cleared" and plan.tasks:
        if not lines:
            lines.append(f"{PLAN_NOTE_HEADER}: keep the task statuses current with write_todos.")
        lines.append(f"Current plan (revision {plan.revision}, {plan.status}):")
        lines.extend(f"- [{task.status}] {task.content}" for task in plan.tasks)
    if not lines:
        return None
    return "\n".join(lines)
