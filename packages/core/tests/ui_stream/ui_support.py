"""A scripted session served over HTTP on loopback: Starlette on uvicorn, an in-process
Worker on a real local engine, and a transport cut for reconnect tests."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import dex
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentUsage,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import AgentTestEnvironment, find_free_loopback_ports
from dex_agents.ui_stream import SessionAccess, agent_chat_routes, agent_event_routes
from dex_agents.values import AgentSessionStartInput, FrameworkMessage

USAGE = AgentUsage(model_calls=1, input_tokens=3, output_tokens=2, total_tokens=5)


def framework_message(role: Any, text: str | None, **projection: Any) -> FrameworkMessage:
    item = json.dumps({"role": role, "text": text, **projection}, sort_keys=True)
    return FrameworkMessage(role=role, framework_item=item, text=text, **projection)


@dataclass
class UIScriptRunner:
    """Replies by the user's words: ``charge`` asks for a read and an approved write;
    ``slow`` streams, waits for ``release`` and streams again; anything else says hello."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    reached_gate: asyncio.Event = field(default_factory=asyncio.Event)
    charges: list[str] = field(default_factory=lambda: list[str]())

    def build_user_message(self, text: str) -> FrameworkMessage:
        return framework_message("user", text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        request = next(m.text or "" for m in reversed(turn.messages) if m.role == "user")
        if "charge" in request:
            return self._charge(turn)
        if "slow" in request:
            turn.events.write_text_delta("part one. ")
            await asyncio.sleep(0.3)  # let the delta flush before the gate opens
            self.reached_gate.set()
            await self.release.wait()
            turn.events.write_text_delta("part two.")
            return TurnCompleted([framework_message("assistant", "part one. part two.")], USAGE)
        for piece in ("Hel", "lo ", "there"):
            turn.events.write_text_delta(piece)
        return TurnCompleted([framework_message("assistant", "Hello there")], USAGE)

    def _charge(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            turn.events.write_text_delta("Checking.")
            calls = [
                DeferredToolCall(
                    "r1", "lookup", '{"item":"book"}', turn.resolve_tool_policy("lookup")
                ),
                DeferredToolCall(
                    "w1", "charge", '{"cents":500}', turn.resolve_tool_policy("charge")
                ),
            ]
            requests = [
                framework_message(
                    "assistant",
                    None,
                    tool_call_id=c.tool_call_id,
                    tool_name=c.tool_name,
                    tool_arguments=c.arguments,
                )
                for c in calls
            ]
            return ToolCallsRequested("round-1", calls, USAGE, new_messages=requests)
        results = [
            framework_message(
                "tool",
                None,
                tool_call_id=r.tool_call_id,
                tool_name=r.tool_name,
                tool_output=describe_tool_call_outcome(r),
            )
            for r in turn.tool_calls
        ]
        summary = ", ".join(f"{r.tool_name} {r.status.value}" for r in turn.tool_calls)
        turn.events.write_text_delta(f"Done: {summary}.")
        return TurnCompleted([*results, framework_message("assistant", f"Done: {summary}.")], USAGE)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        if call.tool_call.tool_name == "charge":
            self.charges.append(call.idempotency_key)
            return ToolExecutionResult("charged 500")
        return ToolExecutionResult("book: in stock")


def build_ui_flow(runner: UIScriptRunner) -> AgentSessionFlow:
    return create_agent_session_flow(
        runner,
        "UIStreamAgent",
        tool_policies={
            "lookup": ToolPolicy(ToolEffect.READ),
            "charge": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        },
    )


def new_session_id() -> str:
    return f"ui-{uuid.uuid4().hex[:12]}"


@dataclass
class AccessLog:
    """The test's authorization callback: it records every check and refuses ``forbidden-*``."""

    checks: list[tuple[str, SessionAccess]] = field(
        default_factory=lambda: list[tuple[str, SessionAccess]]()
    )

    async def __call__(self, request: Request, session_id: str, access: SessionAccess) -> None:
        from starlette.exceptions import HTTPException

        self.checks.append((session_id, access))
        if session_id.startswith("forbidden-"):
            raise HTTPException(403, "not your session")


class CutOnce:
    """ASGI wrapper that drops the connection of the first matching response after
    ``chunks`` body writes, by raising, so the client sees a broken transfer. With ``hold``
    the drop waits for that event after the writes (``cut`` is set before it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.method = ""
        self.path_suffix = ""
        self.chunks = 0
        self.armed = False
        self.skip = 0
        self.hold: asyncio.Event | None = None
        self.cut = asyncio.Event()

    def arm(self, method: str, path_suffix: str, chunks: int) -> None:
        self.arm_after_requests(method, path_suffix, chunks=chunks, skip=0)

    def arm_after_requests(
        self,
        method: str,
        path_suffix: str,
        *,
        chunks: int,
        skip: int,
        hold: asyncio.Event | None = None,
    ) -> None:
        """Cut the matching request after ``skip`` matching requests went through whole."""
        self.method, self.path_suffix, self.chunks, self.skip = method, path_suffix, chunks, skip
        self.hold = hold
        self.cut.clear()
        self.armed = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self.armed
            or scope["type"] != "http"
            or scope["method"] != self.method
            or not scope["path"].endswith(self.path_suffix)
        ):
            await self.app(scope, receive, send)
            return
        if self.skip > 0:
            self.skip -= 1
            await self.app(scope, receive, send)
            return
        self.armed = False
        written = 0

        async def cutting_send(message: Message) -> None:
            nonlocal written
            await send(message)
            if message["type"] == "http.response.body" and message.get("body"):
                written += 1
                if written >= self.chunks:
                    self.cut.set()
                    if self.hold is not None:
                        await self.hold.wait()
                    raise ConnectionAbortedError("test: connection dropped mid-stream")

        await self.app(scope, receive, cutting_send)


@dataclass
class UIServer:
    environment: AgentTestEnvironment
    flow: AgentSessionFlow
    runner: UIScriptRunner
    base_url: str
    access: AccessLog
    cut: CutOnce

    @property
    def client(self) -> dex.AsyncClient:
        return self.environment.client

    async def start_session(self, session_id: str, text: str | None = None) -> None:
        await self.client.start_flow(
            self.flow, session_id, AgentSessionStartInput(initial_message=text)
        )


def build_app(client: dex.AsyncClient, flow: AgentSessionFlow, access: AccessLog) -> Starlette:
    return Starlette(
        routes=[
            *agent_chat_routes(AgentSessionClient(client, flow), authorize=access),
            *agent_event_routes(AgentSessionClient(client, flow), authorize=access),
        ]
    )


def arm_drop_in_the_slow_turn(server: UIServer, hold: asyncio.Event | None = None) -> None:
    """For the chat scenario (ai_chat_scenario.mjs): the fourth POST (hello, charge, the
    approval answer, then "slow") is cut after its first text delta and token."""
    server.cut.arm_after_requests("POST", "/api/chat", chunks=8, skip=3, hold=hold)


@asynccontextmanager
async def serve_ui_session(
    engine_address: str, *, static: dict[str, str] | None = None
) -> AsyncIterator[UIServer]:
    """Engine Worker, Client and a uvicorn server on a free loopback port."""
    runner = UIScriptRunner()
    flow = build_ui_flow(runner)
    environment = await AgentTestEnvironment.start(
        flows=[flow], server_address=engine_address, worker_in_process=True
    )
    access = AccessLog()
    app = build_app(environment.client, flow, access)
    for path, content in (static or {}).items():
        app.add_route(path, _static(path, content), methods=["GET"])
    cut = CutOnce(app)
    (port,) = find_free_loopback_ports(1)
    config = uvicorn.Config(cut, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.02)
        yield UIServer(environment, flow, runner, f"http://127.0.0.1:{port}", access, cut)
    finally:
        runner.release.set()
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(serving, 30)
        await environment.close()


def _static(path: str, content: str) -> Callable[[Request], Awaitable[Any]]:
    """A fixed page; a ``.js`` path is served as a script, anything else as HTML."""
    from starlette.responses import Response

    media_type = "text/javascript" if path.endswith(".js") else "text/html"

    async def page(request: Request) -> Response:
        return Response(content, media_type=media_type)

    return page
