"""Tool calls that the server runs as MCP tasks: hand-over, polls, questions, cancellation.

A task of a Streamable HTTP server, when the runner polls tasks, is handed to
``PollToolTask`` (``ToolTaskStarted``); any other task is polled inside its tool Step on
the call's own connection, for at most the wait timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from mcp import MCPError
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from dex_agents.mcp._calls import CallHandedOver, McpToolCallInterruptedError, result_text
from dex_agents.mcp._config import McpHttpServer
from dex_agents.mcp._connections import (
    Connections,
    PooledSession,
    ResumedHttpSession,
    ServerConfig,
)
from dex_agents.mcp._tasks import (
    LEGACY_TASKS_PROTOCOL_VERSION,
    CreatedTask,
    LegacyTaskInput,
    McpTaskState,
    TaskContinuation,
    TaskQuestion,
    cancel_task,
    get_task,
    next_poll_interval,
    task_result,
    update_task,
)
from dex_agents.runner import (
    AgentEventWriter,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)

__all__ = [
    "INPUT_NOT_PROVIDED",
    "McpTaskPollError",
    "TaskCall",
    "TaskCalls",
    "TaskStartedHere",
]

logger = logging.getLogger("dex_agents.mcp")

_ANSWER_GRACE_SECONDS = 5.0
"""How long a 2025-11-25 poll stays after answering, for the task to end or move on."""

INPUT_NOT_PROVIDED = (
    "the MCP server asked for input that this agent session cannot provide yet ({detail})"
)


class McpTaskPollError(Exception):
    """A poll of an MCP task failed: the server could not be reached or no longer knows it.

    A Step failure: ``PollToolTask`` tries three times, then records the call by effect.
    """


class TaskStartedHere(CallHandedOver):
    """Ends a ``tools/call`` whose task the session polls from ``PollToolTask``."""

    def __init__(self, created: CreatedTask, session_id: str | None) -> None:
        super().__init__(f"MCP task {created.task_id} started")
        self.created = created
        self.session_id = session_id
        """The ``Mcp-Session-Id`` of the session the task is bound to, if any."""


@dataclass
class TaskCall:
    """How one ``tools/call`` treats a task the server creates for it."""

    tool_call_id: str | None
    tool_name: str
    events: AgentEventWriter | None
    durable: bool = False
    """Hand the task to ``PollToolTask``; otherwise poll it inside the request."""
    heartbeat: Callable[[], Awaitable[None]] | None = None
    save_checkpoint: Callable[[str], Awaitable[None]] | None = None
    server: ServerConfig | None = None

    def status_changed(self, task_id: str, status: str, message: str | None) -> None:
        if self.events is not None:
            self.events.write_event(
                "mcp.task_status",
                {
                    "tool_call_id": self.tool_call_id,
                    "tool_name": self.tool_name,
                    "task_id": task_id,
                    "status": status,
                    "status_message": message,
                },
            )


class TaskCalls:
    """Drives the MCP tasks of tool calls: in the tool Step, or one poll at a time."""

    def __init__(
        self, connections: Connections, *, max_interval_seconds: float, wait_timeout_seconds: float
    ) -> None:
        self._connections = connections
        self.max_interval = max_interval_seconds
        self._wait_timeout = wait_timeout_seconds

    async def on_task(
        self, created: CreatedTask, session: ClientSession, task: TaskCall
    ) -> CallToolResult:
        """A task the server created for a ``tools/call``: hand it over or wait for it."""
        if task.save_checkpoint is not None:
            # Before anything else: a retried attempt resumes this task instead of calling again.
            await task.save_checkpoint(created.task_id)
        task.status_changed(created.task_id, created.status, created.status_message)
        if task.durable:
            pooled = self._connections.pooled(task.server) if task.server is not None else None
            raise TaskStartedHere(created, pooled.session_id if pooled is not None else None)
        return await self._wait_in_step(session, created, task)

    async def _wait_in_step(
        self, session: ClientSession, created: CreatedTask, task: TaskCall
    ) -> CallToolResult:
        """Poll a connection-bound task on its own connection, up to the wait timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_timeout
        interval = next_poll_interval(created.poll_interval_ms, None, self.max_interval)
        status = created.status
        while True:
            if loop.time() + interval > deadline:
                raise McpToolCallInterruptedError(
                    f"MCP task {created.task_id} did not finish within "
                    f"{self._wait_timeout:g} seconds"
                )
            await asyncio.sleep(interval)
            if task.heartbeat is not None:
                await task.heartbeat()
            state = await get_task(session, created.task_id)
            if state.status != status:
                status = state.status
                task.status_changed(created.task_id, status, state.status_message)
            if state.status == "input_required":
                await _cancel_best_effort(session, created.task_id)
                raise ToolExecutionError(
                    INPUT_NOT_PROVIDED.format(detail="the task runs on a connection-bound server")
                )
            if state.status != "working":
                return state.call_result() if state.status == "completed" else _error_result(state)
            interval = next_poll_interval(state.poll_interval_ms, interval, self.max_interval)

    async def poll(self, server: ServerConfig, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the call's task once with ``tasks/get``; deliver a pending answer first."""
        record = poll.tool_call
        task_id = record.task_id
        if task_id is None:
            raise McpTaskPollError(f"tool call {record.tool_call_id} has no task to poll")
        before = TaskContinuation.decode(record.input_continuation)
        task = TaskCall(record.tool_call_id, record.tool_name, poll.events)
        # 2025-11-25 servers ask for input during tasks/result, on this session.
        inbox = LegacyTaskInput(task_id, before.input_key, poll.pending_answer)

        async def read(pooled: PooledSession) -> McpTaskState:
            session = pooled.session
            legacy = session.protocol_version == LEGACY_TASKS_PROTOCOL_VERSION
            if poll.pending_answer is not None and before.input_key is not None and not legacy:
                await _deliver_answer(session, task_id, before.input_key, poll)
            state = await get_task(session, task_id)
            if legacy and state.status == "input_required":
                wait = next_poll_interval(state.poll_interval_ms, None, self.max_interval)
                if poll.pending_answer is not None:
                    # Only this poll has the answer: wait for the question it answers.
                    wait = max((poll.deadline - datetime.now(UTC)).total_seconds() - 1, 1)
                pooled.inboxes[task_id] = inbox
                try:
                    state = await _legacy_input(session, inbox, state, wait)
                finally:
                    if pooled.inboxes.get(task_id) is inbox:
                        del pooled.inboxes[task_id]
            return state

        resumed = self._resumed(server, before.session_id)
        session_id = before.session_id
        try:
            if resumed is not None:
                state = await get_task(resumed, task_id)
                if state.status == "input_required":
                    raise McpTaskPollError(
                        f"MCP task {task_id} asks for input on a session another Worker "
                        "opened, which this Worker cannot answer"
                    )
            else:
                state = await self._connections.run(server, read)
                pooled = self._connections.pooled(server)
                session_id = pooled.session_id if pooled is not None else None
        except (MCPError, ToolExecutionError) as error:
            message = error.error.message if isinstance(error, MCPError) else error.message
            raise McpTaskPollError(
                f"cannot read MCP task {task_id} of server {server.name}: {message}"
            ) from error
        if state.status != before.status:
            task.status_changed(task_id, state.status, state.status_message)
        if state.status == "input_required":
            return await self._task_question(server, state, before)
        if state.status == "working":
            interval = next_poll_interval(
                state.poll_interval_ms, record.task_poll_interval_seconds, self.max_interval
            )
            return ToolTaskPending(
                interval, TaskContinuation("working", session_id=session_id).encode()
            )
        return ToolExecutionResult(finished_output(state))

    def _resumed(self, server: ServerConfig, session_id: str | None) -> ResumedHttpSession | None:
        """The session that started a task, when this Worker's session to the server is another.

        The server binds the task to that session (it keeps ``Mcp-Session-Id`` sessions),
        so another Worker, or this one after reconnecting, reaches it only there.
        """
        if session_id is None or not isinstance(server, McpHttpServer):
            return None
        pooled = self._connections.pooled(server)
        if pooled is not None and pooled.session_id == session_id:
            return None
        return ResumedHttpSession(server, session_id)

    async def cancel(
        self, server: ServerConfig, task_id: str, session_id: str | None = None
    ) -> None:
        """Send ``tasks/cancel``; any answer of the server ends the cancellation."""
        resumed = self._resumed(server, session_id)

        async def cancel(pooled: PooledSession) -> None:
            await cancel_task(pooled.session, task_id)

        try:
            if resumed is not None:
                await cancel_task(resumed, task_id)
            else:
                await self._connections.run(server, cancel)
        except MCPError as error:
            logger.info("MCP server %s answered tasks/cancel with %s", server.name, error)

    async def _task_question(
        self, server: ServerConfig, state: McpTaskState, before: TaskContinuation
    ) -> ToolTaskPollOutcome:
        try:
            question = TaskQuestion.first_of(state.input_requests)
        except ValueError as error:
            await self._cancel_quietly(server, state.task_id)
            # Not a ToolExecutionError: the task ran, so the call is recorded by effect.
            raise McpTaskPollError(INPUT_NOT_PROVIDED.format(detail=error)) from None
        if question is None or question.key == before.input_key:
            # The answer is delivered and the server has not moved on yet.
            key = question.key if question is not None else before.input_key
            interval = next_poll_interval(state.poll_interval_ms, None, self.max_interval)
            continuation = TaskContinuation("input_required", key, before.session_id)
            return ToolTaskPending(interval, continuation.encode())
        return ToolInputRequested(
            question.message,
            question.choices,
            allows_free_text=question.choices is None,
            continuation=TaskContinuation(
                "input_required", question.key, before.session_id
            ).encode(),
        )

    async def _cancel_quietly(self, server: ServerConfig, task_id: str) -> None:
        try:
            await self.cancel(server, task_id)
        except Exception as error:
            logger.info(
                "cancelling MCP task %s of server %s failed: %s", task_id, server.name, error
            )


async def _deliver_answer(
    session: ClientSession, task_id: str, input_key: str, poll: ToolTaskPoll
) -> None:
    """Send the user's answer with ``tasks/update`` while the task still asks that question.

    The server ignores an answer to a key it no longer asks, so a retried poll is safe.
    """
    answer = poll.pending_answer
    current = await get_task(session, task_id)
    request = (current.input_requests or {}).get(input_key)
    if answer is None or current.status != "input_required" or request is None:
        return
    question = TaskQuestion.parse(input_key, request)
    await update_task(session, task_id, {input_key: question.response(answer)})


async def _legacy_input(
    session: ClientSession, inbox: LegacyTaskInput, state: McpTaskState, wait: float
) -> McpTaskState:
    """Read a 2025-11-25 task's input request, or deliver the pending answer to it.

    ``tasks/result`` runs for at most ``wait`` seconds: until the server asks (the
    question, or the answer goes back), or the task ends (its result).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    result = asyncio.ensure_future(task_result(session, state.task_id))
    try:
        # After the answer went back, keep the connection until the task ends, asks
        # again or the wait is over, so the answer is not cut off on its way out.
        while not result.done() and not inbox.requests and loop.time() < deadline:
            inbox.asked.clear()
            asked = asyncio.ensure_future(inbox.asked.wait())
            try:
                await asyncio.wait(
                    {result, asked},
                    timeout=deadline - loop.time(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                asked.cancel()
            if inbox.delivered:
                deadline = min(deadline, loop.time() + _ANSWER_GRACE_SECONDS)
    finally:
        if not result.done():
            result.cancel()
    if result.done() and not result.cancelled():
        error = result.exception()
        if isinstance(error, MCPError):
            failed = {"status": "failed", "error": {"message": error.error.message}}
            return state.model_copy(update=failed)
        if error is not None:
            raise error
        dumped = result.result().model_dump(by_alias=True, mode="json")
        return state.model_copy(update={"status": "completed", "result": dumped})
    if inbox.requests:
        return state.model_copy(update={"input_requests": inbox.requests})
    if inbox.delivered or not inbox.has_answer:
        return state.model_copy(update={"input_requests": None})
    raise McpTaskPollError(
        f"MCP task {state.task_id} did not ask again for the input the answer is for"
    )


async def _cancel_best_effort(session: ClientSession, task_id: str) -> None:
    try:
        await cancel_task(session, task_id)
    except MCPError as error:
        logger.info("tasks/cancel of MCP task %s was refused: %s", task_id, error)


def _error_result(state: McpTaskState) -> CallToolResult:
    message = (
        state.error_message()
        if state.status == "failed"
        else f"the MCP server cancelled task {state.task_id}"
    )
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": message}], "isError": True}
    )


def finished_output(state: McpTaskState) -> str:
    """A finished task's output text; a failed or cancelled one raises ``ToolExecutionError``."""
    result = state.call_result() if state.status == "completed" else _error_result(state)
    text = result_text(result)
    if result.is_error:
        raise ToolExecutionError(text or f"MCP task {state.task_id} failed")
    return text
