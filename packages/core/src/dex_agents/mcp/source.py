"""``McpToolSource``: the tools of MCP servers as tools of an agent session.

Every request opens a new connection (handshake within the server's connection
timeout) and closes it afterwards, so no protocol session outlives a request and a
server restart between listing and calling is harmless. Listings are cached per
Worker process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import httpx2
from mcp import Client, MCPError
from mcp.client import Transport
from mcp.client.extension import ClientExtension, advertise
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Implementation

from dex_agents.mcp.config import McpHttpServer, McpStdioServer
from dex_agents.mcp.naming import (
    MCP_IDEMPOTENCY_KEY_META_KEY,
    mcp_tool_name,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.mcp.resource_tools import (
    RESOURCE_AND_PROMPT_TOOL_NAMES,
    resource_and_prompt_tool_definitions,
    run_resource_or_prompt_tool,
)
from dex_agents.mcp.tasks import (
    LEGACY_TASKS_PROTOCOL_VERSION,
    TASKS_EXTENSION_ID,
    CreatedTask,
    LegacyTaskInput,
    McpTaskState,
    TaskChannel,
    TaskClaim,
    TaskContinuation,
    TaskQuestion,
    cancel_task,
    get_task,
    legacy_task_call,
    next_poll_interval,
    task_result,
    update_task,
    uses_legacy_tasks,
)
from dex_agents.models.types import ModelToolCall, ModelToolDefinition
from dex_agents.runner import (
    AgentEventWriter,
    AgentTurnContext,
    CancellationSignal,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.values import ToolEffect

__all__ = ["McpTaskPollError", "McpTool", "McpToolCallInterruptedError", "McpToolSource"]

logger = logging.getLogger(__name__)

_INTERNAL_ERROR = -32603
_CANCELLATION_POLL_SECONDS = 0.2
_ANSWER_GRACE_SECONDS = 5.0
"""How long a 2025-11-25 poll stays after answering, for the task to end or move on."""
_CLIENT_INFO = Implementation(name="dex-agents", version="0.2.0")

ServerConfig = McpStdioServer | McpHttpServer
TaskSupport = Literal["forbidden", "optional", "required"]
_T = TypeVar("_T")

INPUT_NOT_PROVIDED = (
    "the MCP server asked for input that this agent session cannot provide yet ({detail})"
)


class McpToolCallInterruptedError(Exception):
    """A sent ``tools/call`` ended without an answer the session can trust.

    A Step failure, not a ``ToolExecutionError``: ``CallTool`` sends a ``read`` or
    ``idempotent_write`` call again with the same idempotency key; any other effect
    records ``outcome_unknown``.
    """


class McpTaskPollError(Exception):
    """A poll of an MCP task failed: the server could not be reached or no longer knows it.

    A Step failure: ``PollToolTask`` tries three times, then records the call by effect.
    """


class _TaskStartedHere(Exception):
    """Ends a ``tools/call`` whose task the session polls from ``PollToolTask``."""

    def __init__(self, created: CreatedTask) -> None:
        super().__init__(f"MCP task {created.task_id} started")
        self.created = created


@dataclass
class _TaskCall:
    """How one ``tools/call`` treats a task the server creates for it."""

    tool_call_id: str | None
    tool_name: str
    events: AgentEventWriter | None
    durable: bool = False
    """Hand the task to ``PollToolTask``; otherwise poll it inside the request."""
    heartbeat: Callable[[], Awaitable[None]] | None = None
    save_checkpoint: Callable[[str], Awaitable[None]] | None = None

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


@dataclass(frozen=True)
class McpTool(ModelToolDefinition):
    """A listed MCP tool: the offered definition plus where and how to call it."""

    server: str = ""
    mcp_name: str = ""
    effect: ToolEffect | None = None
    """From the annotations of a trusted server; ``None`` leaves the default effect."""
    task_support: TaskSupport = "forbidden"


@dataclass
class _Listing:
    """The cached listing of one server."""

    tools: tuple[McpTool, ...] | None = None
    listed_at: float = 0.0
    failed_at: float | None = None
    running: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Reference:
    server: str
    tool: str
    task_support: TaskSupport = "forbidden"

    def encode(self) -> str:
        return json.dumps(
            {"server": self.server, "task_support": self.task_support, "tool": self.tool},
            separators=(",", ":"),
        )

    @staticmethod
    def decode(text: str | None) -> _Reference | None:
        try:
            value: Any = json.loads(text) if text is not None else None
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        fields: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        server = fields.get("server")
        tool = fields.get("tool")
        support = fields.get("task_support", "forbidden")
        if not isinstance(server, str) or not isinstance(tool, str):
            return None
        if support not in ("forbidden", "optional", "required"):
            support = "forbidden"
        return _Reference(server, tool, support)


@dataclass
class _Progress:
    """Writes ``mcp.tool_progress`` events for one call."""

    events: AgentEventWriter | None
    tool_call_id: str | None
    tool_name: str
    sent: int = field(default=0)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self.events is None:
            return
        self.sent += 1
        self.events.write_event(
            "mcp.tool_progress",
            {
                "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name,
                "progress": progress,
                "total": total,
                "message": message,
            },
        )


class McpToolSource:
    """Tools of MCP servers; a Stepwise ``ToolSource`` and a helper for other runners.

    ``servers`` are configured on the Worker only. Tool names are ``<server>__<tool>``;
    key tool policies by that name.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        source_name: str = "mcp",
        resource_and_prompt_tools_enabled: bool = False,
        listing_ttl_seconds: float = 300.0,
        listing_failure_backoff_seconds: float = 30.0,
        connection_attempts: int = 3,
        task_poll_max_interval_seconds: float = 60.0,
        task_wait_timeout_seconds: float = 600.0,
        task_ttl_seconds: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"McpToolSource got two servers with one name: {names}")
        if connection_attempts < 1:
            raise ValueError("connection_attempts must be at least 1")
        self._servers: dict[str, ServerConfig] = {server.name: server for server in servers}
        self._source_name = source_name
        self._resource_and_prompt_tools_enabled = resource_and_prompt_tools_enabled
        self._listing_ttl = listing_ttl_seconds
        self._failure_backoff = listing_failure_backoff_seconds
        self._connection_attempts = connection_attempts
        self._task_poll_max_interval = task_poll_max_interval_seconds
        self._task_wait_timeout = task_wait_timeout_seconds
        self._task_ttl_ms = round(task_ttl_seconds * 1000)
        self._clock = clock
        self._listings: dict[str, _Listing] = {name: _Listing() for name in self._servers}
        self._background: set[asyncio.Task[None]] = set()

    @property
    def source_name(self) -> str:
        return self._source_name

    @property
    def servers(self) -> Sequence[ServerConfig]:
        return tuple(self._servers.values())

    # --- listing ----------------------------------------------------------------------

    async def list_tools(self, *, refresh: bool = False) -> Sequence[McpTool]:
        """Every server's tools, then the resource and prompt tools when enabled.

        A server that cannot be listed is left out with a warning; names that collide
        keep the first tool in server order.
        """
        await asyncio.gather(*(self._listed(name, refresh=refresh) for name in self._servers))
        offered: dict[str, McpTool] = {}
        for name, listing in self._listings.items():
            for tool in listing.tools or ():
                if tool.name in offered:
                    logger.warning(
                        "MCP tool %r of server %r is left out: its name %r is taken",
                        tool.mcp_name,
                        name,
                        tool.name,
                    )
                    continue
                offered[tool.name] = tool
        if self._resource_and_prompt_tools_enabled and self._servers:
            for definition in resource_and_prompt_tool_definitions(list(self._servers)):
                if definition.name in offered:
                    logger.warning("MCP tool %r is left out: its name is taken", definition.name)
                    continue
                offered[definition.name] = McpTool(
                    definition.name,
                    definition.description,
                    definition.parameters,
                    effect=ToolEffect.READ,
                )
        return tuple(offered.values())

    async def tool_policies(self) -> dict[str, ToolPolicy]:
        """A ``ToolPolicy`` for every classified tool; merge your own over it."""
        return {
            tool.name: ToolPolicy(tool.effect)
            for tool in await self.list_tools()
            if tool.effect is not None
        }

    async def _listed(self, name: str, *, refresh: bool) -> None:
        listing = self._listings[name]
        now = self._clock()
        if refresh or (listing.tools is None and listing.failed_at is None):
            # Shielded: a caller that times out must not cancel the listing others share.
            await asyncio.shield(self._run_listing(name))
            return
        if listing.failed_at is not None:
            if now - listing.failed_at >= self._failure_backoff:
                self._list_in_background(name)
            return
        if now - listing.listed_at >= self._listing_ttl:
            self._list_in_background(name)

    def _run_listing(self, name: str) -> asyncio.Task[None]:
        # One listing per server at a time: later callers share the running one.
        listing = self._listings[name]
        running = listing.running
        if (
            running is None
            or running.done()
            or running.get_loop() is not asyncio.get_running_loop()  # from an earlier loop
        ):
            running = asyncio.ensure_future(self._list_server(name))
            listing.running = running
        return running

    def _list_in_background(self, name: str) -> None:
        task = self._run_listing(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _list_server(self, name: str) -> None:
        server = self._servers[name]
        listing = self._listings[name]
        try:
            tools: list[McpTool] = []
            async with self._client(server) as client:
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(self._tool(server, listed) for listed in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as error:
            # Left out until a listing succeeds; stored calls still reach it by reference.
            listing.tools = None
            listing.failed_at = self._clock()
            logger.warning(
                "MCP server %r offers no tools: listing failed (%s)",
                name,
                _describe(error),
            )
            return
        listing.tools = tuple(tools)
        listing.listed_at = self._clock()
        listing.failed_at = None

    def _tool(self, server: ServerConfig, listed: Any) -> McpTool:
        effect = (
            tool_effect_from_mcp_tool_annotations(listed.annotations)
            if server.trusts_tool_annotations
            else None
        )
        execution = listed.execution
        support = getattr(execution, "task_support", None) if execution is not None else None
        return McpTool(
            mcp_tool_name(server.name, listed.name),
            listed.description or listed.title or listed.name,
            dict(listed.input_schema),
            server=server.name,
            mcp_name=listed.name,
            effect=effect,
            task_support=support or "forbidden",
        )

    # --- the ToolSource protocol ------------------------------------------------------

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        """The call with its policy (session policy, then annotations, then default)."""
        tool = listed_tool if isinstance(listed_tool, McpTool) else self._cached(listed_tool.name)
        effect = tool.effect if tool is not None else None
        reference = (
            _Reference(tool.server, tool.mcp_name, tool.task_support).encode()
            if tool is not None and tool.server
            else None
        )
        return DeferredToolCall(
            call.call_id,
            call.name,
            call.arguments,
            turn.resolve_tool_policy(call.name, effect),
            tool_source_reference=reference,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the call from its stored reference, without a listing.

        A task the server creates for the call is handed to ``PollToolTask`` when the
        server is a Streamable HTTP one and the runner polls tasks; otherwise it is
        polled inside this Step.
        """
        record = call.tool_call
        arguments = _arguments(record.arguments)
        if record.tool_name in RESOURCE_AND_PROMPT_TOOL_NAMES:
            return ToolExecutionResult(await self._resource_or_prompt(record.tool_name, arguments))
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        server = self._server(reference.server)
        # A stdio server's tasks die with its process, which ends with the request.
        durable = isinstance(server, McpHttpServer) and call.supports_tool_tasks
        if durable and call.heartbeat_checkpoint is not None:
            # An earlier attempt got a task and saved its ID: resume it, never call again.
            return ToolTaskStarted(
                call.heartbeat_checkpoint, next_poll_interval(None, None, self._max_interval)
            )
        task = _TaskCall(
            record.tool_call_id,
            record.tool_name,
            call.events,
            durable=durable,
            heartbeat=call.heartbeat,
            save_checkpoint=call.save_heartbeat_checkpoint,
        )
        try:
            output = await self._call(
                reference,
                arguments,
                idempotency_key=call.idempotency_key,
                progress=_Progress(call.events, record.tool_call_id, record.tool_name),
                cancellation=call.cancellation,
                deadline=call.deadline,
                task=task,
            )
        except _TaskStartedHere as started:
            created = started.created
            return ToolTaskStarted(
                created.task_id,
                next_poll_interval(created.poll_interval_ms, None, self._max_interval),
            )
        return ToolExecutionResult(output)

    # --- tasks (SupportsToolTasks) ----------------------------------------------------

    @property
    def _max_interval(self) -> float:
        return self._task_poll_max_interval

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the call's task once with ``tasks/get``; deliver a pending answer first.

        A task the server no longer knows (its TTL passed) or an unreachable server
        fails the poll attempt; after three the call is recorded by its effect.
        """
        record = poll.tool_call
        task_id = record.task_id
        if task_id is None:
            raise McpTaskPollError(f"tool call {record.tool_call_id} has no task to poll")
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        server = self._server(reference.server)
        before = TaskContinuation.decode(record.input_continuation)
        task = _TaskCall(record.tool_call_id, record.tool_name, poll.events)
        # 2025-11-25 servers ask for input during tasks/result, on this connection.
        inbox = LegacyTaskInput(task_id, before.input_key, poll.pending_answer)
        try:
            async with self._client(
                server, advertise(TASKS_EXTENSION_ID), elicitation=inbox
            ) as client:
                legacy = client.session.protocol_version == LEGACY_TASKS_PROTOCOL_VERSION
                if poll.pending_answer is not None and before.input_key is not None and not legacy:
                    await _deliver_answer(client.session, task_id, before.input_key, poll)
                state = await get_task(client.session, task_id)
                if legacy and state.status == "input_required":
                    wait = next_poll_interval(state.poll_interval_ms, None, self._max_interval)
                    if poll.pending_answer is not None:
                        # Only this poll has the answer: wait for the question it answers.
                        wait = max((poll.deadline - datetime.now(UTC)).total_seconds() - 1, 1)
                    state = await _legacy_input(client.session, inbox, state, wait)
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
                state.poll_interval_ms, record.task_poll_interval_seconds, self._max_interval
            )
            return ToolTaskPending(interval, TaskContinuation("working").encode())
        return ToolExecutionResult(_finished_output(state))

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Send ``tasks/cancel``; any answer of the server ends the cancellation."""
        record = cancellation.tool_call
        if record.task_id is None:
            return
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        server = self._server(reference.server)
        async with self._client(server, advertise(TASKS_EXTENSION_ID)) as client:
            try:
                await cancel_task(client.session, record.task_id)
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
            interval = next_poll_interval(state.poll_interval_ms, None, self._max_interval)
            return ToolTaskPending(interval, TaskContinuation("input_required", key).encode())
        return ToolInputRequested(
            question.message,
            question.choices,
            allows_free_text=question.choices is None,
            continuation=TaskContinuation("input_required", question.key).encode(),
        )

    async def _cancel_quietly(self, server: ServerConfig, task_id: str) -> None:
        try:
            async with self._client(server, advertise(TASKS_EXTENSION_ID)) as client:
                await cancel_task(client.session, task_id)
        except Exception as error:
            logger.info(
                "cancelling MCP task %s of server %s failed: %s", task_id, server.name, error
            )

    async def _on_task(
        self, created: CreatedTask, session: ClientSession, task: _TaskCall
    ) -> CallToolResult:
        """A task the server created for a ``tools/call``: hand it over or wait for it."""
        if task.save_checkpoint is not None:
            # Before anything else: a retried attempt resumes this task instead of calling again.
            await task.save_checkpoint(created.task_id)
        task.status_changed(created.task_id, created.status, created.status_message)
        if task.durable:
            raise _TaskStartedHere(created)
        return await self._wait_in_step(session, created, task)

    async def _wait_in_step(
        self, session: ClientSession, created: CreatedTask, task: _TaskCall
    ) -> CallToolResult:
        """Poll a connection-bound task on its own connection, up to the wait timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._task_wait_timeout
        interval = next_poll_interval(created.poll_interval_ms, None, self._max_interval)
        status = created.status
        while True:
            if loop.time() + interval > deadline:
                raise McpToolCallInterruptedError(
                    f"MCP task {created.task_id} did not finish within "
                    f"{self._task_wait_timeout:g} seconds"
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
            interval = next_poll_interval(state.poll_interval_ms, interval, self._max_interval)

    # --- for other runners and framework adapters -------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        idempotency_key: str | None,
        events: AgentEventWriter | None = None,
        cancellation: CancellationSignal | None = None,
    ) -> str:
        """Call a listed tool by its ``<server>__<tool>`` name; returns the output text.

        Pass the session's idempotency key from the adapter's tool context.
        """
        parsed = _arguments(arguments) if isinstance(arguments, str) else dict(arguments)
        if name in RESOURCE_AND_PROMPT_TOOL_NAMES and self._resource_and_prompt_tools_enabled:
            return await self._resource_or_prompt(name, parsed)
        tool = await self._find(name)
        return await self._call(
            _Reference(tool.server, tool.mcp_name, tool.task_support),
            parsed,
            idempotency_key=idempotency_key,
            progress=_Progress(events, None, name),
            cancellation=cancellation,
            deadline=None,
            task=_TaskCall(None, name, events),
        )

    async def deferred_tool_handlers(
        self,
    ) -> dict[str, Callable[[DeferredToolExecution], Awaitable[DeferredToolOutcome]]]:
        """A handler per listed tool, for a runner's ``execute_deferred_tool_call``."""
        return {tool.name: self.execute_deferred_tool_call for tool in await self.list_tools()}

    # --- requests ---------------------------------------------------------------------

    def _cached(self, name: str) -> McpTool | None:
        for listing in self._listings.values():
            for tool in listing.tools or ():
                if tool.name == name:
                    return tool
        return None

    async def _reference_of(self, tool_name: str, stored: str | None) -> _Reference:
        reference = _Reference.decode(stored)
        if reference is None:
            tool = await self._find(tool_name)
            reference = _Reference(tool.server, tool.mcp_name, tool.task_support)
        return reference

    async def _find(self, name: str) -> McpTool:
        tool = self._cached(name)
        if tool is None:
            await self.list_tools()
            tool = self._cached(name)
        if tool is None:
            raise ToolExecutionError(f"no configured MCP server offers a tool named {name}")
        return tool

    async def _call(
        self,
        reference: _Reference,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None,
        progress: _Progress,
        cancellation: CancellationSignal | None,
        deadline: datetime | None,
        task: _TaskCall,
    ) -> str:
        server = self._server(reference.server)
        meta = {MCP_IDEMPOTENCY_KEY_META_KEY: idempotency_key} if idempotency_key else None
        timeout = (deadline - datetime.now(UTC)).total_seconds() if deadline is not None else None

        async def on_task(created: CreatedTask, session: ClientSession) -> CallToolResult:
            return await self._on_task(created, session, task)

        async def request() -> CallToolResult:
            sent = False
            # Only a tool that lists ``execution.taskSupport`` (2025-11-25) can need it.
            channel = TaskChannel() if reference.task_support != "forbidden" else None
            try:
                # Declaring the tasks extension lets the server run the call as a task.
                async with self._client(server, TaskClaim(on_task), channel=channel) as client:
                    sent = True
                    if channel is not None and uses_legacy_tasks(
                        client.session, reference.task_support
                    ):
                        # 2025-11-25: the client asks for the task (``task: {ttl}``).
                        params = {"name": reference.tool, "arguments": arguments}
                        if meta is not None:
                            params["_meta"] = meta
                        created = await legacy_task_call(
                            channel, params, self._task_ttl_ms, timeout
                        )
                        if isinstance(created, CallToolResult):
                            return created
                        return await on_task(created, client.session)
                    return await client.call_tool(
                        reference.tool,
                        arguments,
                        read_timeout_seconds=timeout if timeout is None else max(timeout, 1.0),
                        progress_callback=progress,
                        meta=meta,  # pyright: ignore[reportArgumentType]
                    )
            except (ToolExecutionError, McpToolCallInterruptedError, _TaskStartedHere):
                raise
            except MCPError as error:
                if error.code == _INTERNAL_ERROR:
                    raise McpToolCallInterruptedError(
                        f"MCP server {server.name} answered tools/call {reference.tool} "
                        f"with an internal error: {error.error.message}"
                    ) from error
                raise ToolExecutionError(error.error.message) from error
            except Exception as error:
                if not sent:
                    raise  # ToolExecutionError: the call never left
                raise McpToolCallInterruptedError(
                    f"tools/call {reference.tool} to MCP server {server.name} was sent "
                    f"and broke off: {_describe(error)}"
                ) from error

        result = await _abortable(request(), cancellation)
        text = _result_text(result)
        if result.is_error:
            raise ToolExecutionError(text or f"MCP tool {reference.tool} failed")
        return text

    async def _resource_or_prompt(self, tool_name: str, arguments: dict[str, Any]) -> str:
        server_name = arguments.get("server")
        if not isinstance(server_name, str) or server_name not in self._servers:
            raise ToolExecutionError(f"no MCP server named {server_name!r} is configured")
        async with self._client(self._servers[server_name]) as client:
            try:
                return await run_resource_or_prompt_tool(tool_name, arguments, client)
            except (MCPError, ValueError) as error:
                message = error.error.message if isinstance(error, MCPError) else str(error)
                raise ToolExecutionError(message) from error

    def _server(self, name: str) -> ServerConfig:
        server = self._servers.get(name)
        if server is None:
            raise ToolExecutionError(f"MCP server {name} is not configured on this Worker")
        return server

    @asynccontextmanager
    async def _client(
        self,
        server: ServerConfig,
        *extensions: ClientExtension,
        channel: TaskChannel | None = None,
        elicitation: LegacyTaskInput | None = None,
    ) -> AsyncGenerator[Client]:
        """A connected client, after at most ``connection_attempts`` tries.

        Connecting that keeps failing raises ``ToolExecutionError``: nothing was sent.
        """
        stack = AsyncExitStack()
        errors: list[str] = []
        for _ in range(self._connection_attempts):
            stack = AsyncExitStack()
            try:
                async with asyncio.timeout(server.connection_timeout_seconds):
                    client = await stack.enter_async_context(
                        _new_client(server, stack, extensions, channel, elicitation)
                    )
                break
            except Exception as error:
                errors.append(_describe(error))
                await _close_quietly(stack)
        else:
            raise ToolExecutionError(
                f"cannot connect to MCP server {server.name} after "
                f"{self._connection_attempts} attempts: {errors[-1]}"
            )
        try:
            yield client
        except BaseException as error:
            # Closing the SDK's task group turns the cancellation a broken transport caused
            # into the transport's own error, which then replaces ``error``; an error of the
            # body that the group merely wraps is raised as it is.
            try:
                suppressed = await stack.__aexit__(type(error), error, error.__traceback__)
            except BaseException as closing:
                if _innermost(closing) is error:
                    raise error from None
                raise
            if not suppressed:
                raise
        else:
            await _close_quietly(stack)


def _new_client(
    server: ServerConfig,
    stack: AsyncExitStack,
    extensions: Sequence[ClientExtension],
    channel: TaskChannel | None,
    elicitation: LegacyTaskInput | None,
) -> Client:
    transport: StdioServerParameters | Transport
    if isinstance(server, McpStdioServer):
        transport = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
        )
        if channel is not None:
            transport = channel.wrap(stdio_client(transport))
    else:
        http = _http_client(server)
        stack.push_async_callback(http.aclose)
        transport = streamable_http_client(server.url, http_client=http)
        if channel is not None:
            transport = channel.wrap(transport)
    return Client(
        transport,
        cache=None,
        client_info=_CLIENT_INFO,
        extensions=list(extensions) or None,
        elicitation_callback=elicitation,
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


def _finished_output(state: McpTaskState) -> str:
    """A finished task's output text; a failed or cancelled one raises ``ToolExecutionError``."""
    result = state.call_result() if state.status == "completed" else _error_result(state)
    text = _result_text(result)
    if result.is_error:
        raise ToolExecutionError(text or f"MCP task {state.task_id} failed")
    return text


async def _close_quietly(stack: AsyncExitStack) -> None:
    # The answer is in; a connection that closes badly changes nothing about it.
    try:
        await stack.aclose()
    except Exception as error:
        logger.debug("closing an MCP connection failed: %s", error)


async def _abortable(request: Awaitable[_T], cancellation: CancellationSignal | None) -> _T:
    """Run ``request``, aborting it when the tool Step's cancellation fires."""
    task = asyncio.ensure_future(request)
    if cancellation is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_CANCELLATION_POLL_SECONDS)
            if done:
                return task.result()
            if cancellation.is_cancelled():
                task.cancel()
                raise McpToolCallInterruptedError("the tool Step was cancelled during the call")
    finally:
        if not task.done():
            task.cancel()


def _describe(error: BaseException) -> str:
    """The innermost error of an SDK task group, which says what actually broke."""
    leaf = _innermost(error)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def _innermost(error: BaseException) -> BaseException:
    # getattr, not isinstance: narrowing to BaseExceptionGroup loses the element type.
    inner: Sequence[BaseException] = getattr(error, "exceptions", ())
    return _innermost(inner[0]) if inner else error


def _arguments(text: str) -> dict[str, Any]:
    try:
        value: Any = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise ToolExecutionError(f"the tool arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("the tool arguments must be a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]


def _result_text(result: CallToolResult) -> str:
    """Text blocks joined with newlines, other content as JSON."""
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
        else:
            parts.append(
                json.dumps(
                    block.model_dump(mode="json", by_alias=True, exclude_none=True),
                    sort_keys=True,
                )
            )
    return "\n".join(parts)


# The MCP transports' own defaults: 30 s to connect, write and wait for a pooled
# connection, 5 min to read, since a server may hold a response stream open.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _http_client(server: McpHttpServer) -> httpx2.AsyncClient:
    """An HTTP client for one connection to ``server``, with its configured headers."""
    return httpx2.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT)
