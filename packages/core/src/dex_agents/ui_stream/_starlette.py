"""Thin Starlette adapters: streaming ``Response`` objects and mountable routes.

**Authorize every route.** The session ID, the approval decisions and the resume
token all come from the browser. The routes call the application's ``authorize``
callback with the request, the session ID and the access needed (``"read"`` or
``"write"``) before any helper runs; the callback raises (for example
``HTTPException(403)``) to refuse. The helpers themselves only check that a
decision answers an interrupt pending in that session's active turn.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import dex
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from dex_agents._client import AgentSessionClient
from dex_agents._host import AgentHost
from dex_agents._values import AgentSessionStartInput
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.ui_stream._chunks import (
    AGENT_RESUME_TOKEN_HEADER_NAME,
    open_agent_ui_message_stream,
    read_agent_session_ui_messages,
    read_agent_tool_approval_responses,
    resolve_agent_tool_approvals_with_ui_message_stream,
    send_agent_user_message_with_ui_message_stream,
)
from dex_agents.ui_stream._json import as_list, as_object, dumps
from dex_agents.ui_stream._reader import ResumeTokenRejectedError
from dex_agents.ui_stream._snapshots import (
    convert_agent_event_stream_snapshot_to_json,
    read_agent_event_stream_snapshot,
)
from dex_agents.ui_stream._sse import open_agent_event_sse_stream

__all__ = [
    "UI_MESSAGE_STREAM_HEADERS",
    "Authorize",
    "SessionAccess",
    "SessionSource",
    "agent_chat_routes",
    "agent_event_routes",
    "agent_event_sse_response",
    "agent_ui_message_stream_response",
]

SessionSource = AgentSessionClient | AgentHost
"""Where the routes get the Dex Client and session Flow from."""
SessionAccess = Literal["read", "write"]
"""What a request does with a session, for ``Authorize``: reads it, or changes it."""
Authorize = Callable[[Request, str, SessionAccess], Awaitable[None]]
"""``await authorize(request, session_id, access)``; raise to refuse the request."""

UI_MESSAGE_STREAM_HEADERS = {
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The headers of an AI SDK UI message stream response."""


def agent_ui_message_stream_response(parts: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    """The AI SDK UI message stream (protocol ``v1``) of ``parts``."""

    async def body() -> AsyncIterator[str]:
        async for part in parts:
            yield f"data: {dumps(part)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        body(), media_type="text/event-stream", headers=UI_MESSAGE_STREAM_HEADERS
    )


def agent_event_sse_response(frames: AsyncIterator[str]) -> StreamingResponse:
    """A ``text/event-stream`` response of ``open_agent_event_sse_stream`` frames."""
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


def _not_found(error: dex.DexServiceError) -> Response | None:
    if error.sub_status is dex.ErrorSubStatus.FLOW_NOT_EXISTS:
        return JSONResponse({"error": "no such session"}, status_code=404)
    return None


def _sessions(source: SessionSource) -> tuple[dex.AsyncClient, AgentSessionFlow]:
    sessions = source.client() if isinstance(source, AgentHost) else source
    return sessions.client, sessions.flow


def agent_chat_routes(
    source: SessionSource,
    *,
    authorize: Authorize,
    path: str = "/api/chat",
    continue_after_resume_token: bool = False,
    start_sessions: bool = False,
) -> list[Route]:
    """The three ``useChat`` routes, with the chat ID as the session ID.

    ``source`` is an ``AgentSessionClient``, or an ``AgentHost`` that runs one
    session Flow (its client is taken per request, so the routes can be built
    before the host starts).

    ``GET {path}/{id}``: stored messages and the active turn's resume token.
    ``POST {path}``: a user message, or the answers to tool approvals, streamed.
    ``GET {path}/{id}/stream``: reconnect, with the token in ``x-agent-resume-token``.

    With ``start_sessions``, a user message to a chat ID that has no session yet
    starts one (``authorize`` decides who may write to that ID).
    """

    async def get_chat(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await authorize(request, session_id, "read")
        client, flow = _sessions(source)
        try:
            value = await read_agent_session_ui_messages(client, flow, session_id)
        except dex.DexServiceError as error:
            return _not_found(error) or _raise(error)
        return JSONResponse(value.to_json())

    async def post_chat(request: Request) -> Response:
        try:
            body = as_object(json.loads(await request.body())) or {}
            session_id, messages = body["id"], as_list(body["messages"])
            if not isinstance(session_id, str) or not messages:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "expected {id, messages}"}, status_code=400)
        await authorize(request, session_id, "write")
        client, flow = _sessions(source)
        last = as_object(messages[-1]) or {}
        try:
            if last.get("role") == "assistant":
                parts = await resolve_agent_tool_approvals_with_ui_message_stream(
                    client, flow, session_id, read_agent_tool_approval_responses(last)
                )
            else:
                parts = await _send(client, flow, session_id, _text_of(last), start_sessions)
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        except dex.DexServiceError as error:
            return _not_found(error) or _raise(error)
        return agent_ui_message_stream_response(parts)

    async def get_chat_stream(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await authorize(request, session_id, "read")
        client, flow = _sessions(source)
        try:
            parts = await open_agent_ui_message_stream(
                client,
                flow,
                session_id,
                resume_token=request.headers.get(AGENT_RESUME_TOKEN_HEADER_NAME),
                continue_after_resume_token=continue_after_resume_token,
            )
        except dex.DexServiceError as error:
            return _not_found(error) or _raise(error)
        if parts is None:
            return Response(status_code=204)
        return agent_ui_message_stream_response(parts)

    base = path.rstrip("/")
    return [
        Route(f"{base}/{{session_id}}", get_chat, methods=["GET"]),
        Route(base, post_chat, methods=["POST"]),
        Route(f"{base}/{{session_id}}/stream", get_chat_stream, methods=["GET"]),
    ]


def agent_event_routes(
    source: SessionSource,
    *,
    authorize: Authorize,
    path: str = "/sessions",
) -> list[Route]:
    """``GET {path}/{id}/snapshot`` (browser-safe JSON with ``resume_token``) and
    ``GET {path}/{id}/events`` (SSE; ``Last-Event-ID`` wins over ``?resumeToken=``).

    ``source`` is as for ``agent_chat_routes``."""

    async def get_snapshot(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await authorize(request, session_id, "read")
        client, flow = _sessions(source)
        try:
            value = await read_agent_event_stream_snapshot(client, flow, session_id)
        except dex.DexServiceError as error:
            return _not_found(error) or _raise(error)
        return JSONResponse(convert_agent_event_stream_snapshot_to_json(value))

    async def get_events(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await authorize(request, session_id, "read")
        client, flow = _sessions(source)
        token = request.headers.get("last-event-id")
        if token is None:
            token = request.query_params.get("resumeToken", "")
        try:
            frames = await open_agent_event_sse_stream(client, flow, session_id, token)
        except ResumeTokenRejectedError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        except dex.DexServiceError as error:
            return _not_found(error) or _raise(error)
        return agent_event_sse_response(frames)

    base = path.rstrip("/")
    return [
        Route(f"{base}/{{session_id}}/snapshot", get_snapshot, methods=["GET"]),
        Route(f"{base}/{{session_id}}/events", get_events, methods=["GET"]),
    ]


async def _send(
    client: dex.AsyncClient, flow: AgentSessionFlow, session_id: str, text: str, start: bool
) -> AsyncIterator[dict[str, Any]]:
    try:
        return await send_agent_user_message_with_ui_message_stream(client, flow, session_id, text)
    except dex.DexServiceError as error:
        if not start or error.sub_status is not dex.ErrorSubStatus.FLOW_NOT_EXISTS:
            raise
    with contextlib.suppress(dex.FlowAlreadyStartedError):
        await client.start_flow(flow, session_id, AgentSessionStartInput())
    return await send_agent_user_message_with_ui_message_stream(client, flow, session_id, text)


def _text_of(message: Any) -> str:
    fields = as_object(message) or {}
    texts = [as_object(part) or {} for part in as_list(fields.get("parts"))]
    return "".join(str(part.get("text", "")) for part in texts if part.get("type") == "text")


def _raise(error: Exception) -> Response:
    raise error
