"""The HTTP app: the browser bundle and the JSON routes under ``/products/ai-agent/``.

Every route talks to the session through ``AgentSessionClient`` (and the
``dex_agents.ui_stream`` snapshot and SSE helpers); every body is checked with
pydantic and a bad one gets a 400 that says what is wrong. ``security.TrustMiddleware``
stands in front of every route (Host allowlist, same origin and CSRF, sign-in, the body
limit, security headers).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import importlib
import json
import logging
import os
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import dex
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dex_agents import AgentHost, AgentSessionClient, AgentSnapshot
from dex_agents.runner import APPROVAL_DEADLINE_PASSED, DEFAULT_REJECTION_MESSAGE
from dex_agents.ui_stream import (
    ResumeTokenRejectedError,
    agent_event_sse_response,
    convert_agent_event_stream_snapshot_to_json,
    convert_agent_snapshot_to_json,
    open_agent_event_sse_stream,
    read_agent_event_stream_snapshot,
)
from dex_agents_ai_agent.agent import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_SYSTEM_PROMPT,
    SessionSettings,
)
from dex_agents_ai_agent.flow_close import read_close_reason
from dex_agents_ai_agent.providers import (
    PROVIDERS,
    PROVIDERS_BY_ID,
    StartRuleError,
    check_configured,
    resolve_model_name,
    uses_litellm,
)
from dex_agents_ai_agent.security import CSRF_META, TrustMiddleware, TrustSettings
from dex_agents_ai_agent.tools import BUILT_IN_TOOLS, ToolCatalog

PREFIX = "/products/ai-agent"
STATIC_DIRECTORY = Path(__file__).parent / "static"
MIN_CONTEXT_TOKENS = 64
MAX_CONTEXT_TOKENS = 2_000_000
NO_STORE = {"cache-control": "no-store"}
STORED_TEXT_RATIO = 1.5
"""As the session core: a text's stored JSON may be 1.5 times the UTF-8 limit."""
LISTED_SESSIONS = 50
_logger = logging.getLogger(__name__)
ID_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]{0,126}[A-Za-z0-9])?")
MAX_REFERENCE_LENGTH = 200


class ApiError(Exception):
    """An error the browser shows as it is."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def check_workflow_id(value: str) -> str:
    """An Agent ID: 1 to 128 letters, digits, ``-``, ``_``, ``.`` or ``:``, starting and
    ending with a letter or digit (a UUID fits; a blank, a newline or ``../`` does not)."""
    if not ID_PATTERN.fullmatch(value) or ".." in value:
        raise ValueError(
            "must be 1 to 128 letters, digits, '-', '_', '.' or ':', "
            "starting and ending with a letter or digit"
        )
    return value


def check_reference(value: str) -> str:
    """A message or call ID the session made: printable, no spaces or slashes."""
    if not value or len(value) > MAX_REFERENCE_LENGTH or not value.isprintable():
        raise ValueError(f"must be 1 to {MAX_REFERENCE_LENGTH} printable characters")
    if any(character.isspace() or character == "/" for character in value):
        raise ValueError("must hold no space or '/'")
    return value


WorkflowId = Annotated[StrictStr, AfterValidator(check_workflow_id)]
Reference = Annotated[StrictStr, AfterValidator(check_reference)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class StartBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    provider: StrictStr = "mock"
    model: StrictStr | None = None
    system_prompt: StrictStr = Field(DEFAULT_SYSTEM_PROMPT, alias="systemPrompt", max_length=20_000)
    max_context_tokens: StrictInt = Field(
        DEFAULT_CONTEXT_TOKENS,
        alias="maxContextTokens",
        ge=MIN_CONTEXT_TOKENS,
        le=MAX_CONTEXT_TOKENS,
    )
    mcp_enabled: StrictBool = Field(True, alias="mcpEnabled")
    enabled_mcp_servers: list[StrictStr] = Field(
        default_factory=lambda: list[str](), alias="enabledMcpServers"
    )
    enabled_tools: list[StrictStr] = Field(
        default_factory=lambda: list[str](), alias="enabledTools"
    )


BodyT = TypeVar("BodyT", bound=Body)


class MessageBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    content: StrictStr = Field(min_length=1)
    plan_mode: StrictBool = Field(False, alias="planMode")


class QueueItemBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    message_id: Reference = Field(alias="messageId")


class PlanBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    revision: StrictInt = Field(ge=1)


class ApprovalBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    call_id: Reference = Field(alias="callId")
    approved: StrictBool
    message: StrictStr | None = None


class AnswerBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")
    call_id: Reference = Field(alias="callId")
    answer: StrictStr = Field(min_length=1)


class SessionBody(Body):
    workflow_id: WorkflowId = Field(alias="workflowId")


async def _body(request: Request, model: type[BodyT]) -> BodyT:
    try:
        raw = await request.body()
        return model.model_validate_json(raw or b"null")
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or 'body'}: {issue['msg']}"
            for issue in error.errors()
        )
        raise ApiError(400, f"invalid request body: {problems}") from None


def _query_id(request: Request) -> str:
    value = request.query_params.get("workflowId", "")
    if not value.strip():
        raise ApiError(400, "workflowId query parameter is required")
    try:
        return check_workflow_id(value)
    except ValueError as error:
        raise ApiError(400, f"workflowId {error}") from None


def text_size_error(text: str, limit: int, what: str) -> str:
    """Why ``text`` does not fit the session's limit, or ``""``: its UTF-8 bytes, then
    its stored size (the session stores JSON, with each character other than ASCII
    escaped to six bytes), as the session core counts them."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        return f"the {what} is {_bytes(size)} of UTF-8 text; the limit is {_bytes(limit)}"
    stored = len(json.dumps(text)) - 2
    if stored > limit * STORED_TEXT_RATIO:
        return (
            f"the {what} takes {_bytes(stored)} when stored (each character other than "
            f"ASCII is stored escaped, as six bytes); the limit is "
            f"{_bytes(int(limit * STORED_TEXT_RATIO))} stored"
        )
    return ""


def _bytes(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MiB ({count:,} bytes)"
    if count >= 1024:
        return f"{count / 1024:.0f} KiB ({count:,} bytes)"
    return f"{count:,} bytes"


@dataclass
class AgentApp:
    """The routes over one ``AgentHost`` running the agent's Flow."""

    host: AgentHost
    catalog: ToolCatalog
    retained_messages: int
    environ: Mapping[str, str]
    trust: TrustSettings = field(default_factory=TrustSettings)
    close_reasons: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    titles: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    tools_listed: bool = False

    @property
    def message_limit(self) -> int:
        return self.sessions.flow.options.max_user_message_bytes

    def limits(self) -> dict[str, int]:
        return {
            "messageBytes": self.message_limit,
            "storedMessageBytes": int(self.message_limit * STORED_TEXT_RATIO),
            "bodyBytes": self.trust.max_body_bytes,
        }

    async def list_source_tools(self) -> None:
        """Lists the MCP servers' tools in the background: the page answers meanwhile,
        and the Portal shows the tools once listed."""
        try:
            self.catalog = await self.catalog.with_source_tools()
        finally:
            self.tools_listed = True

    @property
    def sessions(self) -> AgentSessionClient:
        return self.host.client()

    async def portal(self, request: Request) -> Response:
        del request
        return JSONResponse(
            {
                "providers": [provider.to_json(self.environ) for provider in PROVIDERS],
                "mcpServers": list(self.catalog.servers),
                "tools": [tool.to_json() for tool in self.catalog.tools],
                "builtInTools": list(BUILT_IN_TOOLS),
                "toolsPending": not self.tools_listed,
                "limits": self.limits(),
                "defaults": {
                    "systemPrompt": DEFAULT_SYSTEM_PROMPT,
                    "maxContextTokens": DEFAULT_CONTEXT_TOKENS,
                    "messageRetentionLimit": self.retained_messages,
                },
            },
            headers=NO_STORE,
        )

    async def start(self, request: Request) -> Response:
        body = await _body(request, StartBody)
        provider = PROVIDERS_BY_ID.get(body.provider)
        if provider is None:
            raise ApiError(400, f"unknown provider {body.provider!r}")
        if not body.system_prompt.strip():
            raise ApiError(400, "systemPrompt must not be blank")
        try:
            model = resolve_model_name(provider, body.model)
            check_configured(provider, self.environ)
        except StartRuleError as error:
            raise ApiError(400, str(error)) from None
        tools = self._enabled_tools(body)
        settings = SessionSettings(
            provider=provider.id,
            model=model,
            system_prompt=body.system_prompt,
            context_tokens=body.max_context_tokens,
            enabled_tools=tuple(sorted(tools)),
        )
        try:
            await self.sessions.start_session(body.workflow_id, session_settings=settings.to_json())
        except dex.FlowAlreadyStartedError:
            raise ApiError(409, f"an Agent with ID {body.workflow_id} already exists") from None
        return JSONResponse({"workflow_id": body.workflow_id})

    def _enabled_tools(self, body: StartBody) -> set[str]:
        if not body.mcp_enabled:
            return set()
        unknown = set(body.enabled_mcp_servers) - set(self.catalog.servers)
        if unknown:
            raise ApiError(400, f"unknown MCP server {sorted(unknown)[0]!r}")
        if self.catalog.servers and not body.enabled_mcp_servers:
            raise ApiError(400, "Select at least one MCP server, or disable MCP.")
        visible = self.catalog.tool_names_of(body.enabled_mcp_servers)
        unknown = set(body.enabled_tools) - {tool.name for tool in self.catalog.tools}
        if unknown:
            raise ApiError(400, f"unknown tool {sorted(unknown)[0]!r}")
        chosen = set(body.enabled_tools) & visible
        if visible and not chosen:
            raise ApiError(400, "Select at least one available MCP tool, or disable MCP.")
        return chosen

    async def snapshot(self, request: Request) -> Response:
        """The session's snapshot and its Flow's lifecycle, for one refresh of the page."""
        flow_id = _query_id(request)
        lifecycle = await self._lifecycle(flow_id)
        try:
            value = await read_agent_event_stream_snapshot(
                self.host.dex_client, self.sessions.flow, flow_id
            )
        except dex.DexServiceError:
            if lifecycle["status"] == "running":
                raise
            # A closed Flow may no longer answer RPCs: show the lifecycle alone.
            data = convert_agent_snapshot_to_json(AgentSnapshot(state=None))
            data["resume_token"] = ""
        else:
            data = convert_agent_event_stream_snapshot_to_json(value)
        data["agent_status"] = agent_status(data) if lifecycle["status"] == "running" else "closed"
        data["flow"] = lifecycle
        data["limits"] = self.limits()
        approval_tools = {tool.name for tool in self.catalog.tools if tool.requires_approval}
        data["approvals"] = approval_results(data, approval_tools)
        return JSONResponse(data, headers=NO_STORE)

    async def _lifecycle(self, flow_id: str) -> dict[str, str | None]:
        info = await self.host.dex_client.describe_flow(flow_id)
        if info.status is dex.FlowStatus.RUNNING:
            return {"status": "running", "error": None}
        result = await self.host.dex_client.wait_for_flow(flow_id)
        error = result.error_message or None
        if error is None and info.status is dex.FlowStatus.TERMINATED:
            # A closed Flow's history no longer changes: read its reason once.
            if flow_id not in self.close_reasons:
                reason = await read_close_reason(self.host.server_address, flow_id)
                self.close_reasons[flow_id] = reason
            error = self.close_reasons[flow_id] or None
        return {"status": info.status.value, "error": error}

    async def send_message(self, request: Request) -> Response:
        body = await _body(request, MessageBody)
        self._check_text(body.content, "message")
        plan_mode = body.plan_mode or await self._revises_a_stopped_plan(body.workflow_id)
        accepted = await self.sessions.send_user_message(
            body.workflow_id, body.content, plan_mode=plan_mode
        )
        if not accepted:
            raise ApiError(409, "the Agent refused the message")
        return JSONResponse({"accepted": True})

    def _check_text(self, text: str, what: str) -> None:
        if not text.strip():
            raise ApiError(400, f"the {what} is blank")
        problem = text_size_error(text, self.message_limit, what)
        if problem:
            raise ApiError(413, problem)

    async def _revises_a_stopped_plan(self, flow_id: str) -> bool:
        """Whether a message is about an unfinished plan that stopped: the plan is
        ``active`` and no turn runs it. Such a message is handled in planning mode (it
        may revise the plan, not run tools); **Continue plan** resumes the execution.
        The library plans only for a plan-mode message or while a draft exists."""
        snapshot = await self.sessions.snapshot(flow_id)
        plan, state = snapshot.plan, snapshot.state
        stopped = plan is not None and plan.status == "active"
        return stopped and state is not None and state.active_turn_id is None

    async def delete_queued(self, request: Request) -> Response:
        body = await _body(request, QueueItemBody)
        await self._queued_change(
            self.sessions.delete_queued_message(body.workflow_id, body.message_id)
        )
        return JSONResponse({"accepted": True})

    async def steer_queued(self, request: Request) -> Response:
        body = await _body(request, QueueItemBody)
        await self._queued_change(
            self.sessions.steer_user_message(body.workflow_id, message_id=body.message_id)
        )
        return JSONResponse({"accepted": True})

    @staticmethod
    async def _queued_change(change: Awaitable[bool]) -> None:
        try:
            changed = await change
        except dex.ChannelMessageNotFoundError:
            changed = False
        if not changed:
            raise ApiError(404, "the queued message is no longer pending")

    async def execute_plan(self, request: Request) -> Response:
        body = await _body(request, PlanBody)
        if not await self.sessions.execute_plan(body.workflow_id, body.revision):
            raise ApiError(409, "the plan revision is stale or cannot be executed")
        return JSONResponse({"accepted": True})

    async def approve_tool(self, request: Request) -> Response:
        body = await _body(request, ApprovalBody)
        if body.message is not None:
            self._check_text(body.message, "rejection message")
        accepted = await self.sessions.resolve_interrupt(
            body.workflow_id, body.call_id, body.approved, body.message
        )
        return JSONResponse({"accepted": accepted})

    async def answer(self, request: Request) -> Response:
        body = await _body(request, AnswerBody)
        self._check_text(body.answer, "answer")
        if not await self.sessions.answer_question(body.workflow_id, body.call_id, body.answer):
            raise ApiError(409, "the question is no longer pending or the answer does not fit")
        return JSONResponse({"accepted": True})

    async def cancel_turn(self, request: Request) -> Response:
        body = await _body(request, SessionBody)
        return JSONResponse({"accepted": await self.sessions.cancel_turn(body.workflow_id)})

    async def events(self, request: Request) -> Response:
        flow_id = _query_id(request)
        await self.host.dex_client.describe_flow(flow_id)  # an unknown Agent is a 404
        token = request.headers.get("last-event-id") or request.query_params.get("resumeToken", "")
        try:
            frames = await open_agent_event_sse_stream(
                self.host.dex_client, self.sessions.flow, flow_id, token
            )
        except ResumeTokenRejectedError as error:
            raise ApiError(400, str(error)) from None
        return agent_event_sse_response(frames)

    async def index(self, request: Request) -> Response:
        """The page, with the CSRF token its script sends on every mutation."""
        del request
        page = (STATIC_DIRECTORY / "index.html").read_text(encoding="utf-8")
        meta = f'<meta name="{CSRF_META}" content="{html.escape(self.trust.csrf_token)}" />'
        return HTMLResponse(page.replace("<head>", f"<head>\n    {meta}", 1), headers=NO_STORE)

    async def list_sessions(self, request: Request) -> Response:
        """This app's Agents, newest first (the engine's Flow search), each with its
        first message as a title when the session still answers."""
        del request
        flow_type = self.sessions.flow.get_flow_type()
        page = await self.host.dex_client.search_flows(f"FlowType = '{flow_type}'", LISTED_SESSIONS)
        running = [entry.flow_id for entry in page.flows if entry.status is dex.FlowStatus.RUNNING]
        limiter = asyncio.Semaphore(4)

        async def title(flow_id: str) -> None:
            async with limiter:
                found = await self._first_user_text(flow_id)
            if found:
                self.titles[flow_id] = found

        await asyncio.gather(*(title(flow_id) for flow_id in running if flow_id not in self.titles))
        sessions = [
            {
                "workflowId": entry.flow_id,
                "startedAt": entry.started_at.isoformat(),
                "status": entry.status.value,
                "title": self.titles.get(entry.flow_id),
            }
            for entry in page.flows
        ]
        return JSONResponse({"sessions": sessions}, headers=NO_STORE)

    async def _first_user_text(self, flow_id: str) -> str | None:
        try:
            # The first messages of a session: its first user message is its title.
            first = await self.sessions.list_messages(flow_id, before_sequence=5, limit=4)
        except Exception:  # a session that does not answer now just has no title yet
            _logger.debug("no title for %s", flow_id, exc_info=True)
            return None
        for message in first.messages:
            if message.role == "user" and message.text and not message.text.startswith("[Dex]"):
                return message.text[:120]
        return None


NOT_RUN_PREFIX = "The tool call was not run:"


def approval_results(snapshot: Mapping[str, Any], approval_tools: set[str]) -> dict[str, str]:
    """Each approval's result by tool call ID: ``pending``, ``approved``, ``rejected`` or
    ``expired``; from the active turn's records, else from the stored tool result."""
    results: dict[str, str] = {}
    for message in snapshot.get("messages", []):
        if message["role"] != "tool" or not message.get("tool_call_id"):
            continue
        output = message.get("tool_output") or message.get("text") or ""
        if output == DEFAULT_REJECTION_MESSAGE:
            results[message["tool_call_id"]] = "rejected"
        elif output == APPROVAL_DEADLINE_PASSED:
            results[message["tool_call_id"]] = "expired"
        elif message.get("tool_name") in approval_tools and not output.startswith(NOT_RUN_PREFIX):
            results[message["tool_call_id"]] = "approved"
    for record in snapshot.get("tool_calls", []):
        if not record.get("requires_approval"):
            continue
        status = record["status"]
        if status == "awaiting_approval":
            results[record["tool_call_id"]] = "pending"
        elif status == "rejected" and not record.get("cancellation_reason"):
            expired = record.get("rejection_message") == APPROVAL_DEADLINE_PASSED
            results[record["tool_call_id"]] = "expired" if expired else "rejected"
        elif status in ("approved", "succeeded", "failed", "outcome_unknown"):
            results[record["tool_call_id"]] = "approved"
    return results


def agent_status(snapshot: Mapping[str, Any]) -> str:
    """The status the pill shows: the session's, made precise by what it waits for."""
    for interrupt in snapshot.get("pending_interrupts", []):
        approval = interrupt["kind"] == "approval"
        return "waiting_for_tool_approval" if approval else "waiting_for_input"
    if any(call["status"] == "waiting_for_timer" for call in snapshot.get("tool_calls", [])):
        return "waiting_for_timer"
    state = snapshot.get("state")
    return str(state["status"]) if state else "initializing"


def _guarded(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Map expected failures to their status; never answer with a traceback."""

    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as error:
            return JSONResponse({"error": error.message}, status_code=error.status)
        except dex.FlowNotFoundError:
            return JSONResponse({"error": "no such Agent"}, status_code=404)
        except dex.FlowNotActiveOrNotFoundError:
            return JSONResponse({"error": "the Agent is not running"}, status_code=409)
        except dex.DexServiceError as error:
            if error.sub_status is dex.ErrorSubStatus.FLOW_NOT_EXISTS:
                return JSONResponse({"error": "no such Agent"}, status_code=404)
            raise

    return guarded


async def _redirect_to_app(request: Request) -> Response:
    del request
    return RedirectResponse(f"{PREFIX}/")


def create_app(
    host: AgentHost,
    catalog: ToolCatalog,
    *,
    retained_messages: int,
    environ: Mapping[str, str] | None = None,
    trust: TrustSettings | None = None,
) -> Starlette:
    """The Starlette app; its lifespan starts and stops ``host``. ``environ`` is where
    provider credentials are looked up (the process environment by default); ``trust``
    says whom to serve (by default: loopback host names, no sign-in)."""
    trust = TrustSettings(prefix=PREFIX) if trust is None else trust
    app = AgentApp(
        host, catalog, retained_messages, os.environ if environ is None else environ, trust
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        # LiteLLM takes seconds to import; a thread does it now, so the first model Step
        # of a Gemini, Groq or custom session does not hold the Worker's event loop.
        warm_up = (
            asyncio.create_task(
                asyncio.to_thread(importlib.import_module, "dex_agents.models.litellm")
            )
            if uses_litellm(app.environ)
            else None
        )
        listing = asyncio.create_task(app.list_source_tools())
        try:
            async with host:
                yield
        finally:
            listing.cancel()
            with contextlib.suppress(BaseException):
                await listing
            if warm_up is not None:
                with contextlib.suppress(Exception):
                    await warm_up

    def route(path: str, handler: Callable[[Request], Awaitable[Response]], method: str) -> Route:
        return Route(f"{PREFIX}{path}", _guarded(handler), methods=[method])

    routes = [
        Route("/", _redirect_to_app),
        route("/", app.index, "GET"),
        route("/portal", app.portal, "GET"),
        route("/sessions", app.list_sessions, "GET"),
        route("/start", app.start, "POST"),
        route("/snapshot", app.snapshot, "GET"),
        route("/messages", app.send_message, "POST"),
        route("/message-queue/delete", app.delete_queued, "POST"),
        route("/message-queue/steer", app.steer_queued, "POST"),
        route("/plans/execute", app.execute_plan, "POST"),
        route("/tool-approvals", app.approve_tool, "POST"),
        route("/user-input", app.answer, "POST"),
        route("/turns/cancel", app.cancel_turn, "POST"),
        route("/events", app.events, "GET"),
        Mount(f"{PREFIX}/assets", StaticFiles(directory=STATIC_DIRECTORY / "assets")),
    ]
    middleware = [Middleware(TrustMiddleware, settings=trust)]
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
