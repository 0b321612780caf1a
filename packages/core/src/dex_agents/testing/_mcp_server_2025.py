"""A real MCP server for tests that speaks only protocol 2025-11-25, with its experimental tasks.

Written with the ``mcp`` SDK's low-level ``Server``: its middleware refuses
``server/discover`` (so clients fall back to the 2025-11-25 handshake), adds the
``tasks`` capability to the ``initialize`` result, answers a task-augmented
``tools/call`` (params ``task: {ttl}``) with a ``CreateTaskResult`` and serves
``tasks/get``, ``tasks/result`` and ``tasks/cancel``. Both tools list
``execution.taskSupport: "required"``:

- ``slow_report`` completes once the file ``--release`` names exists;
- ``ask_approval`` goes to ``input_required``; every ``tasks/result`` while it waits sends
  the ``elicitation/create`` request, tagged with the task (``_meta``
  ``io.modelcontextprotocol/related-task``), and the first accepted answer completes it.

Run ``python -m dex_agents.testing._mcp_server_2025 --log FILE --http PORT``. Calls,
answers and cancellations are appended to ``--log`` like the other test server's calls.
The task store lives in the process, so every protocol session can read every task.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
)

from dex_agents.testing._mcp_server import (
    IDEMPOTENCY_META_KEY,
    McpHttpTestServer,
    append_call,
    serve_http_app,
)

__all__ = ["LegacyTaskServer", "McpLegacyTaskTestServer", "build_legacy_server", "main"]

RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
_TERMINAL = ("completed", "failed", "cancelled")
_LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}


@dataclass
class _Task:
    task_id: str
    ttl_ms: int | None
    status: str = "working"
    result: dict[str, Any] | None = None
    question: str | None = None
    answer: asyncio.Future[str] | None = None
    runner: asyncio.Task[None] | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def touch(self) -> None:
        """Wake everything waiting for this task to change."""
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def finish(self, text: str) -> None:
        self.status = "completed"
        self.question = None
        self.result = {"content": [{"type": "text", "text": text}], "isError": False}
        self.touch()


class LegacyTaskServer:
    """The task store and the middleware that speaks the 2025-11-25 task methods."""

    def __init__(self, log: Path, release: Path | None, poll_interval_ms: int) -> None:
        self._log = log
        self._release = release
        self._poll_interval_ms = poll_interval_ms
        self._tasks: dict[str, _Task] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        params: dict[str, Any] = dict(ctx.params or {})
        if ctx.method == "server/discover":
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")
        if ctx.method == "initialize":
            result: Any = await call_next(ctx)
            result["capabilities"]["tasks"] = {
                "list": {},
                "cancel": {},
                "requests": {"tools": {"call": {}}},
            }
            return result
        if ctx.method == "tools/call" and isinstance(params.get("task"), dict):
            return self._create(ctx, params)
        if ctx.method == "tasks/get":
            return self._fields(self._task(params))
        if ctx.method == "tasks/result":
            return await self._result(ctx, self._task(params))
        if ctx.method == "tasks/cancel":
            return self._cancel(self._task(params))
        return await call_next(ctx)

    def _create(self, ctx: ServerRequestContext[Any, Any], params: dict[str, Any]) -> Any:
        request = CallToolRequestParams.model_validate(params)
        work = {"slow_report": self._slow, "ask_approval": self._approval}.get(request.name)
        if work is None:
            raise MCPError(code=INVALID_PARAMS, message=f"tool {request.name} has no task support")
        label = str((request.arguments or {}).get("label"))
        key = (ctx.meta or {}).get(IDEMPOTENCY_META_KEY)  # pyright: ignore[reportUnknownMemberType]
        ttl: Any = params["task"].get("ttl")
        append_call(
            self._log,
            {
                "tool": request.name,
                "arguments": {"label": label},
                "idempotency_key": key,
                "requested_ttl_ms": ttl,
            },
        )
        task = _Task(uuid.uuid4().hex, ttl if isinstance(ttl, int) else None)
        self._tasks[task.task_id] = task
        task.runner = asyncio.get_running_loop().create_task(work(task, label))
        return {"task": self._fields(task)}

    def _fields(self, task: _Task) -> dict[str, Any]:
        return {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": task.created_at,
            "lastUpdatedAt": datetime.now(UTC).isoformat(),
            "ttl": task.ttl_ms,
            "pollInterval": self._poll_interval_ms,
        }

    def _task(self, params: dict[str, Any]) -> _Task:
        task = self._tasks.get(str(params.get("taskId")))
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Task {params.get('taskId')} not found")
        return task

    async def _slow(self, task: _Task, label: str) -> None:
        # The release is a file another process writes, so poll for it.
        while self._release is None or not await asyncio.to_thread(self._release.exists):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        task.finish(f"report {label} ready")

    async def _approval(self, task: _Task, label: str) -> None:
        task.answer = asyncio.get_running_loop().create_future()
        task.status = "input_required"
        task.question = f"Approve report {label}?"
        task.touch()
        decision = await task.answer
        task.finish(f"report {label}: {decision}")

    async def _result(self, ctx: ServerRequestContext[Any, Any], task: _Task) -> Any:
        """Block until the task ends, asking for its input on this request meanwhile."""
        while task.status not in _TERMINAL:
            changed = task.changed
            if task.status == "input_required" and task.question is not None:
                await self._ask(ctx, task, task.question)
            if task.status not in _TERMINAL:
                await changed.wait()
        if task.status == "cancelled":
            raise MCPError(code=INVALID_PARAMS, message=f"Task {task.task_id} was cancelled")
        return {**(task.result or {}), "_meta": {RELATED_TASK_META_KEY: {"taskId": task.task_id}}}

    async def _ask(self, ctx: ServerRequestContext[Any, Any], task: _Task, question: str) -> None:
        request = ElicitRequest(
            params=ElicitRequestFormParams(
                message=question,
                requested_schema={
                    "type": "object",
                    "properties": {"decision": {"type": "string", "enum": ["approve", "reject"]}},
                    "required": ["decision"],
                },
                _meta={RELATED_TASK_META_KEY: {"taskId": task.task_id}},  # pyright: ignore[reportCallIssue]
            )
        )
        response = await ctx.session.send_request(
            request,  # pyright: ignore[reportArgumentType]
            ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        append_call(
            self._log,
            {
                "tool": "elicitation",
                "task_id": task.task_id,
                "response": response.model_dump(mode="json", exclude_none=True),
            },
        )
        answer = task.answer
        # The first answer wins; one that comes after it is ignored.
        if answer is not None and not answer.done():
            content: dict[str, Any] = dict(response.content or {})
            accepted = response.action == "accept"
            task.status = "working"
            task.question = None
            answer.set_result(str(content.get("decision")) if accepted else "declined")
            task.touch()

    def _cancel(self, task: _Task) -> Any:
        append_call(self._log, {"tool": "tasks/cancel", "task_id": task.task_id})
        if task.status not in _TERMINAL:
            task.status = "cancelled"
            task.question = None
            if task.runner is not None:
                task.runner.cancel()
            task.touch()
        return self._fields(task)


def build_legacy_server(
    log: Path, release: Path | None = None, task_poll_ms: int = 1000
) -> Server[Any]:
    """The 2025-11-25 test server, logging every call to ``log``."""

    async def list_tools(
        _: ServerRequestContext[Any, Any], __: PaginatedRequestParams | None
    ) -> ListToolsResult:
        required = ToolExecution(task_support="required")
        return ListToolsResult(
            tools=[
                Tool(
                    name="slow_report",
                    description="Build a report; a long task.",
                    input_schema=_LABEL_SCHEMA,
                    annotations=ToolAnnotations(idempotent_hint=True),
                    execution=required,
                ),
                Tool(
                    name="ask_approval",
                    description="Ask for approval of a report, as a task.",
                    input_schema=_LABEL_SCHEMA,
                    annotations=ToolAnnotations(idempotent_hint=True),
                    execution=required,
                ),
            ]
        )

    async def call_tool(
        _: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        # A plain call: both tools require a task.
        return CallToolResult(
            content=[TextContent(type="text", text=f"{params.name} runs only as a task")],
            is_error=True,
        )

    server: Server[Any] = Server("dex-test-2025", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(LegacyTaskServer(log, release, task_poll_ms))
    return server


class McpLegacyTaskTestServer(McpHttpTestServer):
    """The 2025-11-25 test server over stateful Streamable HTTP in a child process."""

    module = "dex_agents.testing._mcp_server_2025"

    def __init__(
        self, *, calls: Path, release: Path | None, process_log: Path, task_poll_ms: int = 1000
    ) -> None:
        # No ``--stateful`` flag: this server always keeps protocol sessions.
        super().__init__(
            calls=calls,
            release=release,
            stateful=False,
            process_log=process_log,
            task_poll_ms=task_poll_ms,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--release", type=Path)
    parser.add_argument("--http", type=int, required=True, help="loopback port")
    parser.add_argument("--task-poll-ms", type=int, default=1000, help="tasks' pollInterval")
    args = parser.parse_args(argv)
    server = build_legacy_server(args.log, args.release, args.task_poll_ms)
    # Stateful: the elicitation of ``tasks/result`` needs a session to answer on.
    asyncio.run(serve_http_app(server.streamable_http_app(), args.http))


if __name__ == "__main__":
    main()
