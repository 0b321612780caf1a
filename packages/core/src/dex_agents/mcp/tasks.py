"""The client side of MCP tasks, the ``io.modelcontextprotocol/tasks`` extension (SEP-2663).

On protocol 2026-07-28 a client opts in per request by declaring the extension in its
capabilities; the server then may answer ``tools/call`` with a task (``resultType:
"task"``) instead of the tool's result. ``tasks/get`` reads the task, with the result,
the error or the outstanding input requests inlined; ``tasks/update`` delivers input
responses; ``tasks/cancel`` asks the server to stop. The ``mcp`` SDK has no client for
these, so this module builds the requests on the SDK's ``ClientSession``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult, RequestParams, Result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, ValidationError

from dex_agents.runner import QuestionAnswer

__all__ = [
    "TASKS_EXTENSION_ID",
    "CreatedTask",
    "McpTaskState",
    "TaskClaim",
    "TaskContinuation",
    "TaskQuestion",
    "cancel_task",
    "get_task",
    "next_poll_interval",
    "update_task",
]

TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
DEFAULT_POLL_INTERVAL_SECONDS = 5


class _TaskFields(Result):
    """The flat task fields every task result carries (camelCase on the wire)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    task_id: str = Field(alias="taskId")
    status: TaskStatus
    status_message: str | None = Field(default=None, alias="statusMessage")
    created_at: str | None = Field(default=None, alias="createdAt")
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class CreatedTask(_TaskFields):
    """What ``tools/call`` returns when the server runs the call as a task."""

    result_type: Literal["task"] = Field(alias="resultType")


class McpTaskState(_TaskFields):
    """A ``tasks/get`` answer: the task plus its result, error or input requests."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")

    def call_result(self) -> CallToolResult:
        return CallToolResult.model_validate(self.result or {"content": []})

    def error_message(self) -> str:
        message = (self.error or {}).get("message")
        if isinstance(message, str) and message:
            return message
        return self.status_message or f"MCP task {self.task_id} failed"


class _TaskIdParams(RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class _UpdateParams(RequestParams):
    task_id: str = Field(serialization_alias="taskId")
    input_responses: dict[str, Any] = Field(serialization_alias="inputResponses")


class _GetTask(mcp_types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams


class _UpdateTask(mcp_types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams


class _CancelTask(mcp_types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams


async def get_task(session: ClientSession, task_id: str) -> McpTaskState:
    return await session.send_request(_GetTask(params=_TaskIdParams(task_id=task_id)), McpTaskState)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    request = _UpdateTask(params=_UpdateParams(task_id=task_id, input_responses=responses))
    await session.send_request(request, Result)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(_CancelTask(params=_TaskIdParams(task_id=task_id)), Result)


class TaskClaim(ClientExtension):
    """Declares the tasks extension on a connection and hands a created task to ``on_task``.

    ``on_task`` either drives the task to its ``CallToolResult`` on the same connection
    or raises to end the call (the tool Step then returns ``ToolTaskStarted``).
    """

    identifier = TASKS_EXTENSION_ID

    def __init__(
        self, on_task: Callable[[CreatedTask, ClientSession], Awaitable[CallToolResult]]
    ) -> None:
        self._on_task = on_task

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (
            ResultClaim(
                result_type="task",
                model=CreatedTask,
                resolve=self._resolve,
                protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
            ),
        )

    async def _resolve(self, created: CreatedTask, context: ClaimContext) -> CallToolResult:
        return await self._on_task(created, context.session)


def next_poll_interval(
    server_poll_interval_ms: int | None, previous_seconds: float | None, maximum_seconds: float
) -> int:
    """The spec's interval rule, in whole seconds.

    The server's ``pollInterval`` rounded up, or, when that is shorter, double the
    previous interval up to ``maximum_seconds``; the first interval is the server's,
    or 5 seconds when it names none.
    """
    server = math.ceil(server_poll_interval_ms / 1000) if server_poll_interval_ms else 0
    if previous_seconds is None:
        backoff = 0 if server else DEFAULT_POLL_INTERVAL_SECONDS
    else:
        backoff = math.ceil(min(previous_seconds * 2, maximum_seconds))
    return max(server, backoff, 1)


@dataclass(frozen=True)
class TaskContinuation:
    """What one poll leaves for the next: the last status seen and the answered input key."""

    status: str | None = None
    input_key: str | None = None

    def encode(self) -> str:
        return json.dumps({"input_key": self.input_key, "status": self.status}, sort_keys=True)

    @staticmethod
    def decode(text: str | None) -> TaskContinuation:
        try:
            value: Any = json.loads(text) if text else {}
        except ValueError:
            return TaskContinuation()
        if not isinstance(value, dict):
            return TaskContinuation()
        fields: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        status = fields.get("status")
        key = fields.get("input_key")
        return TaskContinuation(
            status if isinstance(status, str) else None, key if isinstance(key, str) else None
        )


@dataclass(frozen=True)
class TaskQuestion:
    """One input request of a task (an ``elicitation/create`` form) as a session question.

    A form with one property is asked directly: its ``enum`` are the choices, a boolean
    offers ``yes``/``no``. The answer goes back under that property.
    """

    key: str
    message: str
    field: str | None
    choices: tuple[str, ...] | None
    boolean: bool

    @staticmethod
    def first_of(input_requests: Mapping[str, Any] | None) -> TaskQuestion | None:
        for key, request in sorted((input_requests or {}).items()):
            return TaskQuestion.parse(key, request)
        return None

    @staticmethod
    def parse(key: str, request: Any) -> TaskQuestion:
        try:
            elicit = mcp_types.ElicitRequest.model_validate(request)
        except ValidationError as error:
            raise ValueError(
                f"the MCP server asked for input this session cannot ask the user ({error})"
            ) from None
        params = elicit.params
        if not isinstance(params, mcp_types.ElicitRequestFormParams):
            raise ValueError(
                f"the MCP server asked the user to open a URL ({params.url}), "
                "which this session cannot offer"
            )
        properties: dict[str, Any] = dict(params.requested_schema.get("properties") or {})
        if len(properties) > 1:
            raise ValueError(
                "the MCP server asked for a form with several fields, which this session "
                f"cannot ask the user: {sorted(properties)}"
            )
        field = next(iter(properties), None)
        schema: dict[str, Any] = dict(properties[field]) if field is not None else {}
        enum = schema.get("enum")
        boolean = schema.get("type") == "boolean"
        choices: tuple[str, ...] | None = None
        if isinstance(enum, list):
            choices = tuple(str(item) for item in enum)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        elif boolean:
            choices = ("yes", "no")
        return TaskQuestion(key, params.message, field, choices, boolean)

    def response(self, answer: QuestionAnswer) -> dict[str, Any]:
        """The elicitation result for ``answer``: accepted content, or a decline."""
        if answer.resolution != "answered" or answer.answer is None:
            return {"action": "decline"}
        if self.field is None:
            return {"action": "accept", "content": {}}
        value: str | bool = answer.answer
        if self.boolean:
            value = answer.answer.strip().lower() in ("yes", "true", "y")
        return {"action": "accept", "content": {self.field: value}}
