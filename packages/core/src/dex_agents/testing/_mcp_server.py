"""A real MCP server for tests, written with the ``mcp`` SDK's server API.

Run it as ``python -m dex_agents.testing.mcp_server --log FILE`` (stdio) or with
``--http PORT`` (Streamable HTTP on loopback; ``--stateful`` keeps protocol sessions).
Every ``tools/call`` appends one JSON line to ``--log``: the tool, its arguments,
the idempotency key (and ``traceparent``) the client sent in ``_meta`` and the
server's pid, so a test sees what reached which server process and how often.
Needs the ``dex-agents[mcp]`` extra.

Tools: ``lookup`` (read), ``set_value`` (idempotent), ``send_email`` (no hints: a
non-idempotent write), ``hold`` (no hints; logs its start, then waits until the file
``--release`` names exists, so a test can kill the Worker mid-call, and logs
``hold_finished`` when it returns), ``count_up``
(read; reports progress), ``explode`` (read; an ``isError`` result). Also a resource
``note://readme``, a template ``note://{name}`` and a prompt ``greeting``.

Tasks (the ``io.modelcontextprotocol/tasks`` extension, on the SDK's server extension API):
``build_report`` (idempotent) runs as a task when the client declares the extension and
completes once the ``--release`` file exists; ``approve_report`` (idempotent) asks for
input (``input_required``) and completes with the answer. The task store lives in the
server process, so every connection of the HTTP server can read it, while a stdio
server's tasks end with its process. ``tasks/update`` and ``tasks/cancel`` are logged
like calls (``tool`` is the method), ``--task-poll-ms`` sets the ``pollIntervalMs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, RequestParams, ToolAnnotations
from pydantic import ConfigDict, Field

from dex_agents.testing._ports import find_free_loopback_ports
from dex_agents.testing._processes import ChildProcess

__all__ = [
    "HTTP_READY_LINE",
    "IDEMPOTENCY_META_KEY",
    "McpHttpTestServer",
    "build_server",
    "main",
    "read_calls",
]

IDEMPOTENCY_META_KEY = "io.superdurable.dex/idempotencyKey"


def read_calls(log: Path) -> list[dict[str, Any]]:
    """The calls the server logged, oldest first (``[]`` before the first)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def append_call(log: Path, entry: dict[str, Any]) -> None:
    """Append one JSON line to the call log, synced so another process sees it."""
    with log.open("a") as file:
        file.write(json.dumps(entry) + "\n")
        file.flush()
        os.fsync(file.fileno())


TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
APPROVAL_INPUT_KEY = "approval"


class _TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class _UpdateParams(_TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


@dataclass
class _Task:
    task_id: str
    status: str = "working"
    result: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    runner: asyncio.Task[None] | None = None

    def finish(self, text: str) -> None:
        self.status = "completed"
        self.input_requests = None
        self.result = {"content": [{"type": "text", "text": text}], "isError": False}


class TestTasks(Extension):
    """A small in-process task store and the three ``tasks/*`` methods."""

    identifier = TASKS_EXTENSION_ID

    def __init__(self, log: Path, release: Path | None, poll_interval_ms: int) -> None:
        self._log = log
        self._release = release
        self._poll_interval_ms = poll_interval_ms
        self._tasks: dict[str, _Task] = {}
        self._answers: dict[str, asyncio.Future[str]] = {}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(method="tasks/get", params_type=_TaskIdParams, handler=self._get),
            MethodBinding(method="tasks/update", params_type=_UpdateParams, handler=self._update),
            MethodBinding(method="tasks/cancel", params_type=_TaskIdParams, handler=self._cancel),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        work = {"build_report": self._build, "approve_report": self._approve}.get(params.name)
        capabilities = ctx.session.client_capabilities
        extensions = (capabilities.extensions if capabilities is not None else None) or {}
        if work is None or TASKS_EXTENSION_ID not in extensions:
            return await call_next(ctx)
        label = str((params.arguments or {}).get("label"))
        meta = ctx.meta or {}
        entry = {
            "tool": params.name,
            "arguments": {"label": label},
            "idempotency_key": meta.get(IDEMPOTENCY_META_KEY),  # pyright: ignore[reportUnknownMemberType]
        }
        traceparent = meta.get("traceparent")  # pyright: ignore[reportUnknownMemberType]
        if traceparent is not None:
            entry["traceparent"] = traceparent
        append_call(self._log, entry)
        task = _Task(uuid.uuid4().hex)
        self._tasks[task.task_id] = task
        task.runner = asyncio.get_running_loop().create_task(work(task, label))
        return {"resultType": "task", **self._fields(task)}

    def _fields(self, task: _Task) -> dict[str, Any]:
        return {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": task.created_at,
            "lastUpdatedAt": datetime.now(UTC).isoformat(),
            "ttlMs": 3_600_000,
            "pollIntervalMs": self._poll_interval_ms,
        }

    async def _build(self, task: _Task, label: str) -> None:
        # The release is a file another process writes, so poll for it.
        while self._release is None or not await asyncio.to_thread(self._release.exists):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        task.finish(f"report {label} ready")

    async def _approve(self, task: _Task, label: str) -> None:
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._answers[task.task_id] = answer
        task.status = "input_required"
        task.input_requests = {
            APPROVAL_INPUT_KEY: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": f"Approve report {label}?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "decision": {"type": "string", "enum": ["approve", "reject"]}
                        },
                        "required": ["decision"],
                    },
                },
            }
        }
        decision = await answer
        task.finish(f"report {label}: {decision}")

    def _task(self, task_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Task {task_id} not found")
        return task

    async def _get(self, _: ServerRequestContext[Any, Any], params: _TaskIdParams) -> HandlerResult:
        task = self._task(params.task_id)
        fields = self._fields(task)
        if task.result is not None:
            fields["result"] = task.result
        if task.status == "input_required" and task.input_requests:
            fields["inputRequests"] = task.input_requests
        return fields

    async def _update(
        self, _: ServerRequestContext[Any, Any], params: _UpdateParams
    ) -> HandlerResult:
        task = self._task(params.task_id)
        append_call(
            self._log,
            {"tool": "tasks/update", "task_id": task.task_id, "responses": params.input_responses},
        )
        answer = self._answers.get(task.task_id)
        response: Any = params.input_responses.get(APPROVAL_INPUT_KEY)
        # An answer to a question no longer asked is ignored, so a repeated update is harmless.
        if answer is not None and not answer.done() and isinstance(response, dict):
            fields: dict[str, Any] = response  # pyright: ignore[reportUnknownVariableType]
            content: dict[str, Any] = fields.get("content") or {}
            task.status = "working"
            task.input_requests = None
            accepted = fields.get("action") == "accept"
            answer.set_result(str(content.get("decision")) if accepted else "declined")
        return {}

    async def _cancel(
        self, _: ServerRequestContext[Any, Any], params: _TaskIdParams
    ) -> HandlerResult:
        task = self._task(params.task_id)
        append_call(self._log, {"tool": "tasks/cancel", "task_id": task.task_id})
        if task.status not in ("completed", "failed", "cancelled"):
            task.status = "cancelled"
            task.input_requests = None
            if task.runner is not None:
                task.runner.cancel()
        return {}


def build_server(
    log: Path,
    release: Path | None = None,
    task_poll_ms: int = 1000,
    *,
    colliding_tools: bool = False,
) -> MCPServer:
    """The test server, logging every call to ``log``.

    ``colliding_tools`` adds ``report.status`` and ``report_status``, whose agent tool
    names are the same once sanitized.
    """
    server = MCPServer("dex-test", extensions=[TestTasks(log, release, task_poll_ms)])

    def record(ctx: Context, tool: str, arguments: dict[str, Any]) -> None:
        meta = ctx.request_context.meta or {}
        key = meta.get(IDEMPOTENCY_META_KEY)  # pyright: ignore[reportUnknownMemberType]
        entry = {"tool": tool, "arguments": arguments, "idempotency_key": key, "pid": os.getpid()}
        traceparent = meta.get("traceparent")  # pyright: ignore[reportUnknownMemberType]
        if traceparent is not None:
            entry["traceparent"] = traceparent
        append_call(log, entry)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(order_id: str, ctx: Context) -> str:
        """Look up an order's status."""
        record(ctx, "lookup", {"order_id": order_id})
        return f"order {order_id}: shipped"

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True))
    def set_value(key: str, value: str, ctx: Context) -> str:
        """Set a value; setting it again changes nothing."""
        record(ctx, "set_value", {"key": key, "value": value})
        return f"{key} = {value}"

    @server.tool()
    def send_email(to: str, ctx: Context) -> str:
        """Send an email (not idempotent)."""
        record(ctx, "send_email", {"to": to})
        return f"sent to {to}"

    @server.tool(name="hold")
    async def hold(label: str, ctx: Context) -> str:
        """Start, then wait until the test releases the call."""
        record(ctx, "hold", {"label": label})
        # The release is a file another process writes, so poll for it.
        while release is None or not await asyncio.to_thread(release.exists):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        # Logged as its own entry, so a test sees whether a held call ever finished.
        append_call(
            log, {"tool": "hold_finished", "arguments": {"label": label}, "pid": os.getpid()}
        )
        return f"held {label}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def count_up(to: int, ctx: Context) -> str:
        """Count to ``to``, reporting progress."""
        record(ctx, "count_up", {"to": to})
        for step in range(1, to + 1):
            await ctx.report_progress(step, to, f"step {step}")
        return f"counted to {to}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def explode(ctx: Context) -> str:
        """Always fail."""
        record(ctx, "explode", {})
        raise ValueError("the tool exploded")

    # No output schema: the task's result is plain text.
    @server.tool(annotations=ToolAnnotations(idempotent_hint=True), structured_output=False)
    def build_report(label: str) -> str:
        """Build a report; a long task, so call it as one."""
        raise ValueError(f"build_report {label} runs only as a task")

    # No output schema: the task's result is plain text.
    @server.tool(annotations=ToolAnnotations(idempotent_hint=True), structured_output=False)
    def approve_report(label: str) -> str:
        """Ask for approval of a report, as a task."""
        raise ValueError(f"approve_report {label} runs only as a task")

    if colliding_tools:

        @server.tool(name="report.status", annotations=ToolAnnotations(read_only_hint=True))
        def dotted_status() -> str:
            """The first of two tools with one sanitized name."""
            return "dotted"

        @server.tool(name="report_status", annotations=ToolAnnotations(read_only_hint=True))
        def plain_status() -> str:
            """The second of two tools with one sanitized name."""
            return "plain"

    @server.resource("note://readme", description="The readme note.", mime_type="text/plain")
    def readme() -> str:
        return "Read me first."

    @server.resource("note://{name}", description="A note by name.")
    def note(name: str) -> str:
        return f"note {name}"

    @server.prompt(description="Greet someone.")
    def greeting(name: str) -> str:
        return f"Say hello to {name}."

    return server


HTTP_READY_LINE = "dex-agents test MCP server ready"


class McpHttpTestServer:
    """The test server over Streamable HTTP in a child process, on a loopback port."""

    module = "dex_agents.testing.mcp_server"

    def __init__(
        self,
        *,
        calls: Path,
        release: Path | None,
        stateful: bool,
        process_log: Path,
        task_poll_ms: int = 1000,
    ) -> None:
        self.port = find_free_loopback_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._arguments = ["--log", str(calls), "--http", str(self.port)]
        self._arguments += ["--task-poll-ms", str(task_poll_ms)]
        if release is not None:
            self._arguments += ["--release", str(release)]
        if stateful:
            self._arguments.append("--stateful")
        self._process_log = process_log
        self._process: ChildProcess | None = None

    def start(self) -> Self:
        """Start the child and return once it accepts requests."""
        self._process = ChildProcess.spawn(
            [sys.executable, "-m", self.module, *self._arguments],
            log_path=self._process_log,
        )
        self._process.wait_for_log_line(HTTP_READY_LINE, timedelta(seconds=60))
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


async def _serve_http(server: MCPServer, port: int, stateful: bool) -> None:
    app = server.streamable_http_app(stateless_http=not stateful, json_response=not stateful)
    await serve_http_app(app, port)


async def serve_http_app(app: Any, port: int) -> None:
    """Serve an ASGI app on a loopback port; print the ready line once it accepts requests."""
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(web.serve())
    while not web.started and not serving.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    print(HTTP_READY_LINE, flush=True)
    await serving


def main(argv: list[str] | None = None) -> None:
    """Serve the test tools over stdio, or Streamable HTTP with ``--http PORT``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--release", type=Path)
    parser.add_argument("--http", type=int, help="serve Streamable HTTP on this loopback port")
    parser.add_argument("--stateful", action="store_true", help="keep protocol sessions (HTTP)")
    parser.add_argument("--task-poll-ms", type=int, default=1000, help="tasks' pollIntervalMs")
    parser.add_argument("--colliding-tools", action="store_true", help="two tools, one name")
    args = parser.parse_args(argv)
    server = build_server(
        args.log, args.release, args.task_poll_ms, colliding_tools=args.colliding_tools
    )
    if args.http is None:
        server.run("stdio")
    else:
        asyncio.run(_serve_http(server, args.http, args.stateful))


if __name__ == "__main__":
    main()
