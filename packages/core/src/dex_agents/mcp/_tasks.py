"""The client side of MCP tasks, the ``io.modelcontextprotocol/tasks`` extension (SEP-2663).

On protocol 2026-07-28 a client opts in per request by declaring the extension in its
capabilities; the server then may answer ``tools/call`` with a task (``resultType:
"task"``) instead of the tool's result. ``tasks/get`` reads the task, with the result,
the error or the outstanding input requests inlined; ``tasks/update`` delivers input
responses; ``tasks/cancel`` asks the server to stop. The ``mcp`` SDK has no client for
these, so this module builds the requests on the SDK's ``ClientSession``.

A server that speaks only 2025-11-25 has the experimental tasks of that revision: a
``tools/call`` with ``task: {ttl}`` in its params returns a ``CreateTaskResult``,
``tasks/get`` reads the flat task, ``tasks/result`` blocks until the task ends (and
carries the server's input requests, tagged with the task, meanwhile). The SDK's
``ClientSession`` checks a 2025-11-25 ``tools/call`` result against ``CallToolResult``,
so ``TaskChannel`` sends that one request beside the session, on the same transport.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar

import anyio
import mcp_types
from mcp import MCPError
from mcp.client import ClientRequestContext, Transport
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage
from mcp_types import CallToolResult, RequestParams, Result
from mcp_types.jsonrpc import JSONRPCError, JSONRPCRequest, JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import AliasChoices, ConfigDict, Field, ValidationError

from dex_agents.runner import QuestionAnswer

__all__ = [
    "LEGACY_TASKS_PROTOCOL_VERSION",
    "RELATED_TASK_META_KEY",
    "TASKS_EXTENSION_ID",
    "CreatedTask",
    "LegacyTaskInput",
    "McpTaskState",
    "TaskChannel",
    "TaskClaim",
    "TaskContinuation",
    "TaskQuestion",
    "TaskRequests",
    "cancel_task",
    "get_task",
    "legacy_task_call",
    "next_poll_interval",
    "update_task",
    "uses_legacy_tasks",
]

TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
"""The MCP tasks extension (protocol 2026-07-28) a call declares to let the server run a task."""
LEGACY_TASKS_PROTOCOL_VERSION = "2025-11-25"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
DEFAULT_POLL_INTERVAL_SECONDS = 5
_R = TypeVar("_R", bound=Result)


class TaskRequests(Protocol):
    """What the task requests need of a session: the SDK's ``ClientSession``, or a session
    of another Worker resumed by its ``Mcp-Session-Id``."""

    @property
    def protocol_version(self) -> str | None: ...

    async def send_request(self, request: Any, result_type: type[_R]) -> _R: ...


class _TaskFields(Result):
    """The flat task fields every task result carries (camelCase on the wire)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    task_id: str = Field(alias="taskId")
    status: TaskStatus
    status_message: str | None = Field(default=None, alias="statusMessage")
    created_at: str | None = Field(default=None, alias="createdAt")
    # 2025-11-25 names these ``ttl`` and ``pollInterval`` (also milliseconds).
    ttl_ms: int | None = Field(default=None, validation_alias=AliasChoices("ttlMs", "ttl"))
    poll_interval_ms: int | None = Field(
        default=None, validation_alias=AliasChoices("pollIntervalMs", "pollInterval")
    )


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


class _GetTaskPayload(mcp_types.Request[_TaskIdParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: _TaskIdParams


async def get_task(session: TaskRequests, task_id: str) -> McpTaskState:
    """The task, with its result or error once it has ended.

    On 2025-11-25 the result of an ended task is fetched with ``tasks/result``.
    """
    state = await session.send_request(
        _GetTask(params=_TaskIdParams(task_id=task_id)), McpTaskState
    )
    if session.protocol_version != LEGACY_TASKS_PROTOCOL_VERSION or state.status not in (
        "completed",
        "failed",
    ):
        return state
    try:
        result = await task_result(session, task_id)
    except MCPError as error:
        return state.model_copy(update={"error": {"message": error.error.message}})
    return state.model_copy(update={"result": result.model_dump(by_alias=True, mode="json")})


async def task_result(session: TaskRequests, task_id: str) -> CallToolResult:
    """``tasks/result`` (2025-11-25): waits for the task to end, answering its input requests."""
    request = _GetTaskPayload(params=_TaskIdParams(task_id=task_id))
    return await session.send_request(request, CallToolResult)


async def update_task(session: TaskRequests, task_id: str, responses: dict[str, Any]) -> None:
    request = _UpdateTask(params=_UpdateParams(task_id=task_id, input_responses=responses))
    await session.send_request(request, Result)


async def cancel_task(session: TaskRequests, task_id: str) -> None:
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
    """What one poll leaves for the next: the last status seen, the answered input key, and
    the ``Mcp-Session-Id`` of the session that started the task, when the server keeps
    sessions (so a poll on another Worker reaches the task on that session)."""

    status: str | None = None
    input_key: str | None = None
    session_id: str | None = None

    def encode(self) -> str:
        fields: dict[str, str | None] = {"input_key": self.input_key, "status": self.status}
        if self.session_id is not None:
            fields["session_id"] = self.session_id
        return json.dumps(fields, sort_keys=True)

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
        session_id = fields.get("session_id")
        return TaskContinuation(
            status if isinstance(status, str) else None,
            key if isinstance(key, str) else None,
            session_id if isinstance(session_id, str) else None,
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


def uses_legacy_tasks(session: ClientSession, task_support: str) -> bool:
    """Whether a ``tools/call`` goes out task-augmented the 2025-11-25 way.

    The negotiated version is 2025-11-25, the server advertised task-augmented
    ``tools/call`` and the tool's ``execution.taskSupport`` allows a task.
    """
    if session.protocol_version != LEGACY_TASKS_PROTOCOL_VERSION:
        return False
    capabilities = session.server_capabilities
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    return tools is not None and tools.call is not None and task_support != "forbidden"


class TaskChannel(AbstractAsyncContextManager[Any]):
    """A transport that carries requests the ``ClientSession`` does not send itself.

    Wraps the SDK transport: responses to this channel's requests (string IDs of its
    own) are taken off the read stream, everything else reaches the session unchanged.
    """

    def __init__(self, *, on_closed: Callable[[], None] | None = None) -> None:
        self._on_closed = on_closed
        self._inner: Transport | None = None
        self._stack = AsyncExitStack()
        self._write: Any = None
        self._pending: dict[str, asyncio.Future[JSONRPCResponse | JSONRPCError]] = {}
        self._ids = itertools.count(1)

    def wrap(self, transport: Transport) -> TaskChannel:
        self._inner = transport
        return self

    async def __aenter__(self) -> Any:
        if self._inner is None:
            raise RuntimeError("TaskChannel.wrap() a transport before connecting")
        self._stack = AsyncExitStack()
        read, self._write = await self._stack.enter_async_context(self._inner)
        send_on, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](100)
        group = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(group.cancel_scope.cancel)
        group.start_soon(self._forward, read, send_on)
        return session_read, self._write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Closed on its own: the body's error is not threaded through this stack, whose
        # task group would chain it into a context cycle with the caller's exit stack.
        await self._stack.aclose()

    async def _forward(self, read: Any, send_on: Any) -> None:
        async with send_on:
            async for item in read:
                message = item.message if isinstance(item, SessionMessage) else None
                if isinstance(message, JSONRPCResponse | JSONRPCError):
                    waiter = self._pending.pop(str(message.id), None)
                    if waiter is not None and isinstance(message.id, str):
                        if not waiter.done():
                            waiter.set_result(message)
                        continue
                await send_on.send(item)
        if self._on_closed is not None:
            self._on_closed()
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the MCP connection closed"))

    async def request(
        self, method: str, params: dict[str, Any], read_timeout_seconds: float | None
    ) -> dict[str, Any]:
        """Send one JSON-RPC request on the transport; an error answer raises ``MCPError``."""
        request_id = f"dex-agents-{next(self._ids)}"
        waiter: asyncio.Future[JSONRPCResponse | JSONRPCError] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[request_id] = waiter
        request = JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        await self._write.send(SessionMessage(message=request))
        try:
            async with asyncio.timeout(read_timeout_seconds):
                answer = await waiter
        finally:
            self._pending.pop(request_id, None)
        if isinstance(answer, JSONRPCError):
            raise MCPError.from_error_data(answer.error)
        return answer.result


async def legacy_task_call(
    channel: TaskChannel, params: dict[str, Any], ttl_ms: int, read_timeout_seconds: float | None
) -> CreatedTask | CallToolResult:
    """A task-augmented 2025-11-25 ``tools/call``: the created task, or the plain result."""
    raw = await channel.request(
        "tools/call", {**params, "task": {"ttl": ttl_ms}}, read_timeout_seconds
    )
    if "task" not in raw:
        return CallToolResult.model_validate(raw)
    mcp_types.CreateTaskResult.model_validate(raw)  # the 2025-11-25 shape, checked
    return CreatedTask.model_validate({**raw["task"], "resultType": "task"})


class LegacyTaskInput:
    """Input requests of a 2025-11-25 task, which arrive during ``tasks/result``.

    The elicitation callback of a poll's connection: a request tagged with the task
    gets the user's pending answer when it is the question that answer is for;
    otherwise it is kept in ``requests`` (keyed by its content) and held open until
    the connection closes, and the server asks again on a later ``tasks/result``.
    """

    def __init__(
        self, task_id: str, answered_key: str | None, answer: QuestionAnswer | None
    ) -> None:
        self._task_id = task_id
        self._answered_key = answered_key
        self._answer = answer
        self.asked = asyncio.Event()
        self.requests: dict[str, Any] = {}
        self.delivered = False

    @property
    def has_answer(self) -> bool:
        return self._answer is not None

    async def __call__(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        related: Any = (params.meta or {}).get(RELATED_TASK_META_KEY)
        if not isinstance(related, dict) or related.get("taskId") != self._task_id:  # pyright: ignore[reportUnknownMemberType]
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST, message="no task of this poll asked for input"
            )
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        wire.get("_meta", {}).pop(RELATED_TASK_META_KEY, None)
        request = {"method": "elicitation/create", "params": wire}
        digest = hashlib.sha256(json.dumps(wire, sort_keys=True).encode()).hexdigest()
        key = f"elicitation-{digest[:16]}"
        if self._answer is not None and key == self._answered_key:
            try:
                response = TaskQuestion.parse(key, request).response(self._answer)
            except ValueError:
                response = {"action": "decline"}
            self.delivered = True
            self.asked.set()
            return mcp_types.ElicitResult.model_validate(response)
        self.requests[key] = request
        self.asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")
