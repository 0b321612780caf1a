"""Tool tasks in framework adapters: how a framework tool starts a task, and routing a
task poll or cancellation to the poller of the tool that started it.

A framework tool raises ``StartedToolTask`` (its framework may not pass a
``ToolTaskStarted`` return value through); the adapter's tool Step returns the task to
the session. The adapters take the pollers as ``tool_tasks=``: one ``SupportsToolTasks``
object for every tool, or a mapping from tool name to poller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import NoReturn

from dex_agents._contract import (
    DeferredToolOutcome,
    SupportsToolTasks,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)

__all__ = [
    "StartedToolTask",
    "ToolTaskForwarding",
    "ToolTaskPollers",
    "ToolTasksOption",
    "check_tool_task_poller",
    "returning_started_task",
    "start_tool_task",
    "tool_task_started_in",
]

ToolTasksOption = SupportsToolTasks | Mapping[str, SupportsToolTasks] | None
"""An adapter's ``tool_tasks=``: one poller for every tool, or pollers by tool name."""


class StartedToolTask(Exception):
    """Raised by a framework tool that started remote work for the session to poll.

    Save the task ID with ``get_deferred_tool_execution().save_heartbeat_checkpoint``
    first, and raise it again from the saved checkpoint on a retried attempt.
    """

    __module__ = "dex_agents.runner"  # the public import path, as tracebacks show it

    def __init__(
        self, task_id: str, poll_interval_seconds: float, *, continuation: str | None = None
    ) -> None:
        """``continuation`` is stored as ``tool_call.input_continuation`` for the first poll."""
        super().__init__(f"tool task {task_id} started")
        self.started = ToolTaskStarted(task_id, poll_interval_seconds, continuation=continuation)


def start_tool_task(task_id: str, poll_interval_seconds: float) -> NoReturn:
    """Hand the started task ``task_id`` to the session from inside a framework tool."""
    raise StartedToolTask(task_id, poll_interval_seconds)


def tool_task_started_in(error: BaseException) -> ToolTaskStarted | None:
    """The task a tool started, when ``error`` is (or wraps) ``StartedToolTask``.

    Frameworks may wrap a tool's exception in an exception group or chain it.
    """
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, StartedToolTask):
            return current.started
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        if current.__cause__ is not None:
            pending.append(current.__cause__)
    return None


def check_tool_task_poller(name: str, poller: object) -> SupportsToolTasks:
    """``poller`` when it has both methods; ``TypeError`` naming the tool otherwise."""
    if not isinstance(poller, SupportsToolTasks):
        raise TypeError(
            f"the tool task poller of {name!r} must have async poll_tool_task and "
            "cancel_tool_task methods"
        )
    return poller


class ToolTaskPollers:
    """An adapter's ``tool_tasks=``: polls and cancels through the poller of the call's tool."""

    def __init__(self, tool_tasks: ToolTasksOption = None) -> None:
        self._every: SupportsToolTasks | None = None
        self._pollers: dict[str, SupportsToolTasks] = {}
        if tool_tasks is None:
            return
        if isinstance(tool_tasks, Mapping):
            self._pollers = {
                name: check_tool_task_poller(name, poller) for name, poller in tool_tasks.items()
            }
        else:
            self._every = check_tool_task_poller("every tool", tool_tasks)

    def __bool__(self) -> bool:
        return self._every is not None or bool(self._pollers)

    def get(self, tool_name: str) -> SupportsToolTasks | None:
        return self._pollers.get(tool_name, self._every)

    async def poll(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Forward to the poller of ``poll.tool_call.tool_name``.

        A tool without a poller raises ``LookupError``, so the call's effect decides its
        outcome after the poll's attempts.
        """
        name = poll.tool_call.tool_name
        poller = self.get(name)
        if poller is None:
            raise LookupError(f"tool {name} started a task, but no tool task poller is set for it")
        return await poller.poll_tool_task(poll)

    async def cancel(self, cancellation: ToolTaskCancellation) -> None:
        """Forward to the poller of the call's tool; nothing to stop without one."""
        poller = self.get(cancellation.tool_call.tool_name)
        if poller is not None:
            await poller.cancel_tool_task(cancellation)


async def returning_started_task(run: Awaitable[DeferredToolOutcome]) -> DeferredToolOutcome:
    """The tool's outcome, or the task it started by raising ``StartedToolTask``."""
    try:
        return await run
    except Exception as error:
        started = tool_task_started_in(error)
        if started is None:
            raise
        return started


class ToolTaskForwarding:
    """Base of the adapter runners: ``poll_tool_task`` and ``cancel_tool_task`` go to the
    pollers of their ``tool_tasks=`` option; without it the runner polls no tasks."""

    tool_tasks: ToolTaskPollers = ToolTaskPollers()

    @property
    def polls_tool_tasks(self) -> bool:
        """``False`` without pollers, so ``DeferredToolExecution.supports_tool_tasks`` is too."""
        return bool(self.tool_tasks)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return await self.tool_tasks.poll(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        await self.tool_tasks.cancel(cancellation)
