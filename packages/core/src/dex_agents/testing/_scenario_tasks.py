"""The scenario tool tasks: a ``STARTS_TASK`` tool's task, polled and cancelled across
Worker processes through files in the scenario's state directory.

A poll finds the task done once the ``TASK_DONE_GATE`` gate is released; each poll and
each cancellation is recorded in the tool runs log, so a test counts them across
Worker restarts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from dex_agents._contract import (
    ToolExecutionResult,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents.testing._gates import FileGate, InvocationLog
from dex_agents.testing._scripts import TOOL_RUNS_LOG, ScenarioTool, ToolBehaviour

__all__ = ["TASK_CANCEL_LOG_NAME", "TASK_DONE_GATE", "TASK_POLL_LOG_NAME", "ScenarioTaskPoller"]

TASK_DONE_GATE = "task_done"
"""The ``FileGate`` whose release lets a scenario's tool task complete."""
TASK_POLL_LOG_NAME = "task_poll"
"""The ``InvocationLog`` of the scenario task poller's polls."""
TASK_CANCEL_LOG_NAME = "task_cancel"
"""The ``InvocationLog`` of the scenario task poller's cancellations."""


class ScenarioTaskPoller:
    """``SupportsToolTasks`` for the scenario's ``STARTS_TASK`` tools."""

    def __init__(self, tools: Sequence[ScenarioTool], state_directory: Path) -> None:
        self._tools = {t.name: t for t in tools if t.behaviour is ToolBehaviour.STARTS_TASK}
        self._state_directory = state_directory
        self._log = InvocationLog(state_directory / TOOL_RUNS_LOG)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        record = poll.tool_call
        self._log.record(
            TASK_POLL_LOG_NAME,
            idempotency_key=poll.idempotency_key,
            details={"task_id": record.task_id, "attempt": poll.attempt},
        )
        if not FileGate(self._state_directory, TASK_DONE_GATE).is_open():
            return ToolTaskPending(1)
        tool = self._tools[record.tool_name]
        values = cast("dict[str, Any]", json.loads(record.arguments or "{}"))
        return ToolExecutionResult(tool.text.format(**values) if values else tool.text)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self._log.record(
            TASK_CANCEL_LOG_NAME,
            idempotency_key=cancellation.idempotency_key,
            details={"task_id": cancellation.tool_call.task_id},
        )
