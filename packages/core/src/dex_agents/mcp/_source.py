"""``McpToolSource``: the tools of MCP servers as tools of an agent session.

The front of the package: listing (``_listing``), calls (``_calls``), task calls
(``_task_calls``) and connections (``_connections``) each live in their own module.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from dex_agents._adapter_support import current_deferred_tool_execution
from dex_agents.mcp._calls import (
    Progress,
    ToolReference,
    parse_arguments,
    run_resource_or_prompt,
    send_tool_call,
    trace_meta,
)
from dex_agents.mcp._config import McpHttpServer
from dex_agents.mcp._connections import Connections, ServerConfig
from dex_agents.mcp._listing import Listings, McpTool
from dex_agents.mcp._resource_tools import RESOURCE_AND_PROMPT_TOOL_NAMES
from dex_agents.mcp._task_calls import McpTaskPollError, TaskCall, TaskCalls, TaskStartedHere
from dex_agents.mcp._tasks import CreatedTask, TaskContinuation, next_poll_interval
from dex_agents.models import ModelToolCall, ModelToolDefinition
from dex_agents.runner import (
    AgentEventWriter,
    AgentTurnContext,
    CancellationSignal,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ResolvedToolPolicy,
    StartedToolTask,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)

__all__ = ["McpToolSource"]


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
        listing_timeout_seconds: float = 8.0,
        listing_ttl_seconds: float = 300.0,
        listing_failure_backoff_seconds: float = 30.0,
        connection_attempts: int = 3,
        task_poll_max_interval_seconds: float = 60.0,
        task_wait_timeout_seconds: float = 600.0,
        task_ttl_seconds: float = 86400.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Configure the servers and how the source lists, connects and runs tasks.

        Args:
            servers: The servers, configured on the Worker (never from session input).
            source_name: Stored with every call; unique among an agent's sources and
                stable across deploys.
            resource_and_prompt_tools_enabled: Also offer ``mcp_list_resources_and_prompts``,
                ``mcp_read_resource`` and ``mcp_get_prompt``.
            listing_timeout_seconds: How long ``list_tools`` waits for each server that
                has no listing yet (8 s); keep it below the runner's listing budget (the
                Stepwise ``tool_source_listing_timeout``, 10 s). A server that takes longer
                goes on listing in the background and is offered once it answered;
                ``call_tool`` of a name not listed yet waits for it to the end.
            listing_ttl_seconds: After this, a listed server is listed again in the
                background while its earlier tools are offered.
            listing_failure_backoff_seconds: A server whose listing failed is tried again
                in the background after this.
            connection_attempts: Tries to open a server's session, each within the server's
                ``connection_timeout_seconds``.
            task_poll_max_interval_seconds: The longest interval between task polls.
            task_wait_timeout_seconds: How long a tool Step polls a task it cannot hand
                to ``PollToolTask`` (a stdio server's); such a task is requested with a TTL
                of four times this.
            task_ttl_seconds: The TTL requested for a task ``PollToolTask`` polls (24 h):
                the task's run time plus the longest time no Worker serves the session.
            clock: Monotonic seconds, for the listing TTL and backoff.
        """
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"McpToolSource got two servers with one name: {names}")
        if connection_attempts < 1:
            raise ValueError("connection_attempts must be at least 1")
        if listing_timeout_seconds <= 0:
            raise ValueError("listing_timeout_seconds must be positive")
        self._servers: dict[str, ServerConfig] = {server.name: server for server in servers}
        self._source_name = source_name
        self._resource_and_prompt_tools_enabled = resource_and_prompt_tools_enabled
        self._task_ttl_ms = round(task_ttl_seconds * 1000)
        # A task polled inside its tool Step outlives every attempt's wait.
        self._in_step_task_ttl_ms = round(4 * task_wait_timeout_seconds * 1000)
        self._connections = Connections(attempts=connection_attempts)
        self._listings = Listings(
            self._servers,
            self._connections,
            resource_and_prompt_tools_enabled=resource_and_prompt_tools_enabled,
            ttl_seconds=listing_ttl_seconds,
            failure_backoff_seconds=listing_failure_backoff_seconds,
            deadline_seconds=listing_timeout_seconds,
            clock=clock,
        )
        self._tasks = TaskCalls(
            self._connections,
            max_interval_seconds=task_poll_max_interval_seconds,
            wait_timeout_seconds=task_wait_timeout_seconds,
        )

    @property
    def source_name(self) -> str:
        """The name the session stores with each call's reference (``"mcp"`` by default)."""
        return self._source_name

    @property
    def servers(self) -> Sequence[ServerConfig]:
        """The configured servers, in order."""
        return tuple(self._servers.values())

    # --- listing ----------------------------------------------------------------------

    async def list_tools(self, *, refresh: bool = False) -> Sequence[McpTool]:
        """Every server's tools, then the resource and prompt tools when enabled.

        A server that cannot be listed is left out with a warning; names that collide
        keep the first tool in server order.
        """
        return await self._listings.list_tools(refresh=refresh)

    async def tool_policies(self) -> dict[str, ToolPolicy]:
        """A ``ToolPolicy`` for every classified tool; merge your own over it."""
        return {
            tool.name: ToolPolicy(tool.effect, requires_approval=tool.requires_approval)
            for tool in await self.list_tools()
            if tool.effect is not None
        }

    async def aclose(self) -> None:
        """End this event loop's MCP sessions (stdio servers stop) and running listings.

        Optional: a Worker's sessions end with its process. Call it when a source is
        dropped while its event loop goes on, such as between tests.
        """
        await self._listings.aclose()
        await self._connections.aclose()

    # --- the ToolSource protocol ------------------------------------------------------

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        """The call with its policy (session policy, then annotations, then default)."""
        tool = (
            listed_tool
            if isinstance(listed_tool, McpTool)
            else self._listings.cached(listed_tool.name)
        )
        effect = tool.effect if tool is not None else None
        reference = (
            ToolReference(tool.server, tool.mcp_name, tool.task_support).encode()
            if tool is not None and tool.server
            else None
        )
        policy = turn.resolve_tool_policy(call.name, effect)
        if tool is not None and tool.requires_approval and call.name not in turn.tool_policies:
            policy = ResolvedToolPolicy(policy.effect, True)
        return DeferredToolCall(
            call.call_id,
            call.name,
            call.arguments,
            policy,
            tool_source_reference=reference,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the call from its stored reference, without a listing.

        A task the server creates for the call is handed to ``PollToolTask`` when the
        server is a Streamable HTTP one and the runner polls tasks; otherwise it is
        polled inside this Step.
        """
        record = call.tool_call
        arguments = parse_arguments(record.arguments)
        if record.tool_name in RESOURCE_AND_PROMPT_TOOL_NAMES:
            return ToolExecutionResult(
                await run_resource_or_prompt(
                    self._connections, self._servers, record.tool_name, arguments
                )
            )
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        server = self._server(reference.server)
        # A stdio server's tasks die with its process, which ends with the request.
        durable = isinstance(server, McpHttpServer) and call.supports_tool_tasks
        if durable and call.heartbeat_checkpoint is not None:
            # An earlier attempt got a task and saved its ID: resume it, never call again.
            pooled = self._connections.pooled(server)
            return ToolTaskStarted(
                call.heartbeat_checkpoint,
                next_poll_interval(None, None, self._tasks.max_interval),
                continuation=_session_continuation(pooled.session_id if pooled else None),
            )
        task = TaskCall(
            record.tool_call_id,
            record.tool_name,
            call.events,
            durable=durable,
            heartbeat=call.heartbeat,
            save_checkpoint=call.save_heartbeat_checkpoint,
            server=server,
        )
        try:
            output = await self._call(
                reference,
                arguments,
                idempotency_key=call.idempotency_key,
                progress=Progress(call.events, record.tool_call_id, record.tool_name),
                cancellation=call.cancellation,
                deadline=call.deadline,
                task=task,
            )
        except TaskStartedHere as started:
            created = started.created
            return ToolTaskStarted(
                created.task_id,
                next_poll_interval(created.poll_interval_ms, None, self._tasks.max_interval),
                continuation=_session_continuation(started.session_id),
            )
        return ToolExecutionResult(output)

    # --- tasks (SupportsToolTasks) ----------------------------------------------------

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the call's task once with ``tasks/get``; deliver a pending answer first.

        A task the server no longer knows (its TTL passed) or an unreachable server
        fails the poll attempt; after three the call is recorded by its effect.
        """
        record = poll.tool_call
        if record.task_id is None:
            raise McpTaskPollError(f"tool call {record.tool_call_id} has no task to poll")
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        return await self._tasks.poll(self._server(reference.server), poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Send ``tasks/cancel``; any answer of the server ends the cancellation."""
        record = cancellation.tool_call
        if record.task_id is None:
            return
        reference = await self._reference_of(record.tool_name, record.tool_source_reference)
        session_id = TaskContinuation.decode(record.input_continuation).session_id
        await self._tasks.cancel(self._server(reference.server), record.task_id, session_id)

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

        Pass the session's idempotency key from the adapter's tool context. Called from
        the tool Step of the session call ``name`` (a framework tool that wraps this
        tool), the call runs as ``execute_deferred_tool_call`` does: a task of a
        Streamable HTTP server, when the runner polls tasks, raises ``StartedToolTask``
        so the adapter hands it to ``PollToolTask`` (make this source the poller of its
        tools, ``tool_tasks={tool.name: source, ...}``), and the session then asks the
        task's input requests as questions. Any other task is polled inside the call.
        """
        parsed = parse_arguments(arguments) if isinstance(arguments, str) else dict(arguments)
        if name in RESOURCE_AND_PROMPT_TOOL_NAMES and self._resource_and_prompt_tools_enabled:
            return await run_resource_or_prompt(self._connections, self._servers, name, parsed)
        tool = await self._find(name)
        execution = current_deferred_tool_execution()
        if execution is not None and execution.tool_call.tool_name == name:
            return await self._call_in_tool_step(execution, tool, parsed)
        return await self._call(
            ToolReference(tool.server, tool.mcp_name, tool.task_support),
            parsed,
            idempotency_key=idempotency_key,
            progress=Progress(events, None, name),
            cancellation=cancellation,
            deadline=None,
            task=TaskCall(None, name, events),
        )

    def tool_function(self, name: str) -> Callable[..., Awaitable[str]]:
        """The body of a framework tool that wraps the listed tool ``name``.

        An async function of the tool's arguments, as keywords, that runs ``call_tool``
        with the running session tool call's idempotency key; the adapters'
        ``mcp_source_tools`` wrap it in their frameworks' tool types.
        """

        async def call(**arguments: Any) -> str:
            execution = current_deferred_tool_execution()
            key = execution.idempotency_key if execution is not None else None
            return await self.call_tool(name, arguments, idempotency_key=key)

        return call

    async def _call_in_tool_step(
        self, execution: DeferredToolExecution, tool: McpTool, arguments: dict[str, Any]
    ) -> str:
        """A framework tool's call of ``tool`` in its session tool Step, as the Step's own."""
        reference = ToolReference(tool.server, tool.mcp_name, tool.task_support).encode()
        record = dataclasses.replace(
            execution.tool_call,
            arguments=json.dumps(arguments, separators=(",", ":")),
            tool_source_reference=reference,
        )
        outcome = await self.execute_deferred_tool_call(
            dataclasses.replace(execution, tool_call=record)
        )
        if isinstance(outcome, ToolTaskStarted):
            # Frameworks pass a tool's return value on as text: raise, for the adapter.
            raise StartedToolTask(
                outcome.task_id, outcome.poll_interval_seconds, continuation=outcome.continuation
            )
        if not isinstance(outcome, ToolExecutionResult):  # pragma: no cover - MCP never asks
            raise ToolExecutionError(f"MCP tool {tool.name} asked a question outside a task")
        return outcome.output

    async def deferred_tool_handlers(
        self,
    ) -> dict[str, Callable[[DeferredToolExecution], Awaitable[DeferredToolOutcome]]]:
        """A handler per listed tool, for a runner's ``execute_deferred_tool_call``."""
        return {tool.name: self.execute_deferred_tool_call for tool in await self.list_tools()}

    # --- requests ---------------------------------------------------------------------

    async def _reference_of(self, tool_name: str, stored: str | None) -> ToolReference:
        reference = ToolReference.decode(stored)
        if reference is None:
            tool = await self._find(tool_name)
            reference = ToolReference(tool.server, tool.mcp_name, tool.task_support)
        return reference

    async def _find(self, name: str) -> McpTool:
        tool = await self._listings.find(name)
        if tool is None:
            raise ToolExecutionError(f"no configured MCP server offers a tool named {name}")
        return tool

    async def _call(
        self,
        reference: ToolReference,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None,
        progress: Progress,
        cancellation: CancellationSignal | None,
        deadline: datetime | None,
        task: TaskCall,
    ) -> str:
        server = self._server(reference.server)

        async def on_task(created: CreatedTask, session: ClientSession) -> CallToolResult:
            return await self._tasks.on_task(created, session, task)

        return await send_tool_call(
            self._connections,
            server,
            reference,
            arguments,
            idempotency_key=idempotency_key,
            progress=progress,
            cancellation=cancellation,
            deadline=deadline,
            task_ttl_ms=self._task_ttl_ms if task.durable else self._in_step_task_ttl_ms,
            on_task=on_task,
            meta=trace_meta(),
        )

    def _server(self, name: str) -> ServerConfig:
        server = self._servers.get(name)
        if server is None:
            raise ToolExecutionError(f"MCP server {name} is not configured on this Worker")
        return server


def _session_continuation(session_id: str | None) -> str | None:
    """The first poll's continuation: the session the task is bound to, if any."""
    return TaskContinuation(session_id=session_id).encode() if session_id is not None else None
