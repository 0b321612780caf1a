"""Browser streams of a session: the AI SDK UI message stream for ``useChat``, plain
Server-Sent Events whose ``id`` is the Dex resume token, and browser-safe snapshots.

Needs the ``ui`` extra (``pip install 'dex-agents[ui]'``), for Starlette.

**Authorize every route**: the session ID, approval decisions and resume tokens
come from the browser; see ``Authorize`` and ``agent_chat_routes``.
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "dex_agents.ui_stream needs the 'ui' extra: pip install 'dex-agents[ui]'"
    ) from error

from dex_agents.ui_stream._chunks import (
    AGENT_RESUME_TOKEN_HEADER_NAME,
    MAX_APPROVAL_DECISIONS,
    AgentSessionUIMessages,
    AgentToolApprovalResponse,
    AgentUIMessageStream,
    open_agent_ui_message_stream,
    read_agent_session_ui_messages,
    read_agent_tool_approval_responses,
    resolve_agent_tool_approval,
    resolve_agent_tool_approvals_with_ui_message_stream,
    send_agent_user_message_with_ui_message_stream,
)
from dex_agents.ui_stream._parts import FinishReason, UIPartMapper
from dex_agents.ui_stream._reader import ResumeTokenRejectedError
from dex_agents.ui_stream._snapshots import (
    STEP_ONLY_MESSAGE_FIELDS,
    STEP_ONLY_TOOL_CALL_FIELDS,
    AgentEventStreamSnapshot,
    convert_agent_event_stream_snapshot_to_json,
    convert_agent_snapshot_to_json,
    convert_agent_snapshot_to_ui_messages,
    read_agent_event_stream_snapshot,
)
from dex_agents.ui_stream._sse import open_agent_event_sse_stream
from dex_agents.ui_stream._starlette import (
    UI_MESSAGE_STREAM_HEADERS,
    Authorize,
    SessionAccess,
    SessionSource,
    agent_chat_routes,
    agent_event_routes,
    agent_event_sse_response,
    agent_ui_message_stream_response,
)
from dex_agents.ui_stream._tokens import encode_ui_resume_token_for_tests

__all__ = [
    "AGENT_RESUME_TOKEN_HEADER_NAME",
    "MAX_APPROVAL_DECISIONS",
    "STEP_ONLY_MESSAGE_FIELDS",
    "STEP_ONLY_TOOL_CALL_FIELDS",
    "UI_MESSAGE_STREAM_HEADERS",
    "AgentEventStreamSnapshot",
    "AgentSessionUIMessages",
    "AgentToolApprovalResponse",
    "AgentUIMessageStream",
    "Authorize",
    "FinishReason",
    "ResumeTokenRejectedError",
    "SessionAccess",
    "SessionSource",
    "UIPartMapper",
    "agent_chat_routes",
    "agent_event_routes",
    "agent_event_sse_response",
    "agent_ui_message_stream_response",
    "convert_agent_event_stream_snapshot_to_json",
    "convert_agent_snapshot_to_json",
    "convert_agent_snapshot_to_ui_messages",
    "encode_ui_resume_token_for_tests",
    "open_agent_event_sse_stream",
    "open_agent_ui_message_stream",
    "read_agent_event_stream_snapshot",
    "read_agent_session_ui_messages",
    "read_agent_tool_approval_responses",
    "resolve_agent_tool_approval",
    "resolve_agent_tool_approvals_with_ui_message_stream",
    "send_agent_user_message_with_ui_message_stream",
]
