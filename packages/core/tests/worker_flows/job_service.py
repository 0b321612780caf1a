"""A small job service for tool task tests: a real HTTP server on loopback, its client,
and a Stepwise agent whose ``make_report`` tool starts jobs the session then polls.

The test process runs ``JobService``; Worker children reach it through
``JOB_SERVICE_URL``. Jobs run until the test finishes or fails them, so nothing here
depends on wall-clock time. ``ask`` jobs first ask which format to use.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.runner import (
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ToolCallContext,
    create_stepwise_session_flow,
    function_tool,
)
from dex_agents.values import ToolEffect

__all__ = ["JobService", "JobServiceClient", "JobTasks", "build_flows"]

FLOW_TYPE = "JobReportsAgent"
URL_VARIABLE = "JOB_SERVICE_URL"
POLL_INTERVAL_VARIABLE = "JOB_POLL_INTERVAL_SECONDS"


@dataclass
class Job:
    id: str
    key: str
    kind: str
    status: str = "running"  # running | done | failed | cancelled
    result: str | None = None
    error: str | None = None
    question_id: str | None = None
    question: str | None = None
    choices: list[str] | None = None
    answers: dict[str, str] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "result": self.result,
            "error": self.error,
            "question_id": self.question_id,
            "question": self.question,
            "choices": self.choices,
        }


class JobService:
    """The service: jobs by idempotency key, with counters the tests assert on."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.by_key: dict[str, str] = {}
        self.start_requests: Counter[str] = Counter()
        self.cancels: Counter[str] = Counter()
        self.answers: list[tuple[str, str, str | None]] = []
        self.changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> JobService:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what the tests do ---

    def job_for(self, key: str) -> Job | None:
        job_id = self.by_key.get(key)
        return self.jobs.get(job_id) if job_id is not None else None

    def finish(self, job_id: str, result: str) -> None:
        with self.changed:
            self.jobs[job_id].status = "done"
            self.jobs[job_id].result = result

    def fail(self, job_id: str, error: str) -> None:
        with self.changed:
            self.jobs[job_id].status = "failed"
            self.jobs[job_id].error = error

    # --- the HTTP API ---

    def _start(self, body: dict[str, Any]) -> dict[str, Any]:
        key = str(body["key"])
        self.start_requests[key] += 1
        if key not in self.by_key:  # idempotent by key: a repeated start gets the same job
            job = Job(id=f"job-{len(self.jobs) + 1}", key=key, kind=str(body["kind"]))
            if job.kind == "ask":
                job.question_id, job.question = "q1", "Which format?"
                job.choices = ["pdf", "csv"]
            self.jobs[job.id] = job
            self.by_key[key] = job.id
        return self.jobs[self.by_key[key]].view()

    def _answer(self, job: Job, body: dict[str, Any]) -> dict[str, Any]:
        question_id = str(body["question_id"])
        if job.question_id == question_id and question_id not in job.answers:
            resolution = str(body["resolution"])
            answer = body.get("answer")
            job.answers[question_id] = resolution
            self.answers.append((job.id, resolution, answer))
            job.question_id = job.question = job.choices = None
            if resolution == "answered":
                job.result = f"report as {answer}"
            else:
                job.result = f"report as pdf ({resolution})"
            job.status = "done"
        return job.view()

    def _handle(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.changed:
            parts = [part for part in path.split("/") if part]
            if method == "POST" and parts == ["jobs"]:
                return self._start(body)
            job = self.jobs[parts[1]]
            if method == "GET" and len(parts) == 2:
                return job.view()
            if parts[2] == "answer":
                return self._answer(job, body)
            if parts[2] == "cancel":
                self.cancels[job.id] += 1
                if job.status == "running":
                    job.status = "cancelled"
                return job.view()
            raise KeyError(path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                try:
                    data = json.dumps(service._handle(method, self.path, body)).encode()  # pyright: ignore[reportPrivateUsage]
                    self.send_response(200)
                except KeyError:
                    data = b'{"error":"not found"}'
                    self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply("GET")

            def do_POST(self) -> None:
                self._reply("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


class JobServiceClient:
    """The Worker side: plain HTTP requests, run off the event loop."""

    def __init__(self, url: str | None = None) -> None:
        self._url = url

    @property
    def url(self) -> str:
        return self._url or os.environ[URL_VARIABLE]

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        def send() -> Any:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(
                f"{self.url}{path}",
                data=data,
                method=method,
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        return await asyncio.to_thread(send)


def _interval() -> float:
    return float(os.environ.get(POLL_INTERVAL_VARIABLE, "1"))


class JobTasks:
    """Polls and cancels jobs, as the spec's example runner does (``SupportsToolTasks``)."""

    def __init__(self, client: JobServiceClient | None = None) -> None:
        self.client = client or JobServiceClient()

    async def start(self, kind: str, key: str, context: ToolCallContext) -> ToolTaskStarted:
        if context.heartbeat_checkpoint is not None:
            # An earlier attempt started the job.
            return ToolTaskStarted(context.heartbeat_checkpoint, _interval())
        job = await self.client.request("POST", "/jobs", {"key": key, "kind": kind})
        if context.save_heartbeat_checkpoint is not None:
            await context.save_heartbeat_checkpoint(job["id"])
        return ToolTaskStarted(job["id"], _interval())

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        job_id = poll.tool_call.task_id
        job = await self.client.request("GET", f"/jobs/{job_id}")
        answered = poll.tool_call.input_continuation
        resolved = poll.pending_answer
        if resolved is not None and job["question_id"] == answered:
            job = await self.client.request(
                "POST",
                f"/jobs/{job_id}/answer",
                {
                    "question_id": answered,
                    "resolution": resolved.resolution,
                    "answer": resolved.answer,
                },
            )
        if job["question_id"] is not None and job["question_id"] != answered:
            return ToolInputRequested(
                job["question"],
                choices=tuple(job["choices"]),
                allows_free_text=False,
                continuation=job["question_id"],
            )
        if job["status"] == "done":
            return ToolExecutionResult(job["result"])
        if job["status"] == "failed":
            raise ToolExecutionError(job["error"])
        kept = answered if job["question_id"] == answered else None
        return ToolTaskPending(_interval(), continuation=kept)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        await self.client.request("POST", f"/jobs/{cancellation.tool_call.task_id}/cancel")


def _reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=" | ".join(result.output for result in results))
    text = ScriptedModelClient.user_texts(request)[-1]
    if text.startswith("report"):
        kind = text.split()[-1]
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("make_report", {"kind": kind}),))
    return ScriptedModelReply(text=f"echo: {text}")


def build_flows(
    effect: ToolEffect = ToolEffect.IDEMPOTENT_WRITE,
    flow_type: str = FLOW_TYPE,
    interrupt_deadline: timedelta | None = None,
    tracing: Any = None,
) -> list[Any]:
    tasks = JobTasks()

    async def make_report(kind: str, context: ToolCallContext) -> ToolTaskStarted:
        """Start a report job."""
        return await tasks.start(kind, context.idempotency_key, context)

    definition = AgentDefinition(
        name="reports",
        instructions="Make reports.",
        model=ScriptedModelClient(_reply),
        tools=[function_tool(make_report, effect=effect, tasks=tasks)],
    )
    return [
        create_stepwise_session_flow(
            definition, flow_type, interrupt_deadline=interrupt_deadline, tracing=tracing
        )
    ]
