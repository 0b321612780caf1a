"""Routing a task poll or cancellation to the poller of the tool that started the task.

A runner that offers tools from several places (function tools, tool sources, a
framework's tools) implements ``poll_tool_task`` and ``cancel_tool_task`` by handing
each to the ``SupportsToolTasks`` object of the call's tool. The adapters take these
objects as ``tool_tasks={tool_name: poller}``.
"""

from __future__ import annotations

from collections.abc import Mapping

from dex_agents.runner import (
    SupportsToolTasks,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)

__all__ = ["ToolTaskPollers", "check_tool_task_poller"]


def check_tool_task_poller(name: str, poller: object) -> SupportsToolTasks:
    """``poller`` when it has both methods; ``TypeError`` naming the tool otherwise."""
    if not isinstance(poller, SupportsToolTasks):
        raise TypeError(
            f"the tool task poller of {name!r} must have async poll_tool_task and "
            "cancel_tool_task methods"
        )
    return poller


class ToolTaskPollers:
    """``tool_tasks={tool_name: poller}`` of a runner: polls and cancels by the call's tool."""

    def __init__(self, pollers: Mapping[str, SupportsToolTasks] | None = None) -> None:
        if pollers is not None and not isinstance(pollers, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("tool_tasks must map tool names to pollers")
        self._pollers: dict[str, SupportsToolTasks] = {
            name: check_tool_task_poller(name, poller) for name, poller in (pollers or {}).items()
        }

    def __bool__(self) -> bool:
        return bool(self._pollers)

    def get(self, tool_name: str) -> SupportsToolTasks | None:
        return self._pollers.get(tool_name)

    async def poll(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Forward to the poller of ``poll.tool_call.tool_name``.

        A tool without a poller raises ``LookupError``, so the call's effect decides its
        outcome after the poll's attempts.
        """
        name = poll.tool_call.tool_name
        poller = self._pollers.get(name)
        if poller is None:
            raise LookupError(f"tool {name} started a task, but no tool task poller is set for it")
        return await poller.poll_tool_task(poll)

    async def cancel(self, cancellation: ToolTaskCancellation) -> None:
        """Forward to the poller of the call's tool; nothing to stop without one."""
        poller = self._pollers.get(cancellation.tool_call.tool_name)
        if poller is not None:
            await poller.cancel_tool_task(cancellation)
