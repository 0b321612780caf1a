"""The AI SDK UI message stream of a session: framework-neutral async generators of parts.

Every part is followed by a transient ``data-agent-resume-token`` part whose
token names the place right after it (see ``tokens.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import dex

from dex_agents._values import (
    AgentSnapshot,
    AgentStatus,
    AgentToolCallStatus,
    AgentUserMessage,
    InterruptKind,
    ResolveInterruptInput,
)
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.ui_stream._json import as_list, as_object
from dex_agents.ui_stream._parts import (
    FinishReason,
    ToolDetails,
    UIPartMapper,
    resume_token_part,
    tool_outcome_part,
)
from dex_agents.ui_stream._positions import latest_position, turn_start_position
from dex_agents.ui_stream._reader import EventReader, ResumeTokenRejectedError
from dex_agents.ui_stream._snapshots import (
    assistant_message_id,
    convert_agent_snapshot_to_ui_messages,
)
from dex_agents.ui_stream._tokens import (
    UIStreamPosition,
    decode_ui_resume_token,
    encode_ui_resume_token,
)

__all__ = [
    "AGENT_RESUME_TOKEN_HEADER_NAME",
    "MAX_APPROVAL_DECISIONS",
    "AgentSessionUIMessages",
    "AgentToolApprovalResponse",
    "AgentUIMessageStream",
    "open_agent_ui_message_stream",
    "read_agent_session_ui_messages",
    "read_agent_tool_approval_responses",
    "resolve_agent_tool_approval",
    "resolve_agent_tool_approvals_with_ui_message_stream",
    "send_agent_user_message_with_ui_message_stream",
]

AGENT_RESUME_TOKEN_HEADER_NAME = "x-agent-resume-token"
"""The response header that carries the resume token of a UI message stream."""
MAX_APPROVAL_DECISIONS = 100
"""Most approval decisions one request may carry."""
COMMIT_WAIT = timedelta(seconds=3)
_COMMIT_POLL_SECONDS = 0.05
_LOCK_CONFLICT_RETRIES = 20
_TOOL_EVENTS = frozenset({"tool_call_deferred", "tool_call_finished", "interrupt_raised"})
_APPROVAL_CHECK_EVENTS = frozenset(
    {"interrupt_raised", "interrupt_resolved", "tool_call_finished", "tool_call_deferred"}
)
_OTHER_END_EVENTS = frozenset({"turn_steered", "turn_cancelled"})
Part = dict[str, Any]


AgentUIMessageStream = AsyncIterator[Part]
"""UI message stream parts, ready to be sent as SSE ``data:`` lines."""


# --- following one turn ----------------------------------------------------------------------


@dataclass
class _Follow:
    client: dex.AsyncClient
    flow: AgentSessionFlow
    flow_id: str
    reader: EventReader
    mapper: UIPartMapper | None
    """``None`` while waiting for the next turn to start."""
    turn_start: str
    skip: int = 0
    finish_when_awaiting_approval: bool = True
    turns_before: int | None = None
    """For a sent message: ``turn_count`` before sending, to notice a turn without events."""

    async def parts(self) -> AsyncIterator[Part]:
        idle_ended = 0
        while self.mapper is None or not self.mapper.ended:
            before = self.reader.token
            message = await self.reader.next()
            if message is None:
                state_before = self.mapper.copy_state() if self.mapper is not None else None
                finish, idle_ended = await self._on_idle(idle_ended)
                async for part in self._emit(finish, before, before, state_before):
                    yield part
                continue
            idle_ended = 0
            event = message.value
            if self.mapper is None:
                if event.type != "turn_started":
                    continue
                self.mapper = UIPartMapper.for_turn(event.turn_id)
                self.turn_start = before
            if event.turn_id != self.mapper.turn_id:
                continue
            state_before = self.mapper.copy_state()
            tool = await self._tool_details(event.type, event.payload_data())
            parts = self.mapper.map(event, tool)
            parts += await self._after_event(event.type, event.payload_data())
            async for part in self._emit(parts, before, message.resume_token, state_before):
                yield part

    async def _emit(
        self,
        parts: list[Part],
        before: str,
        after: str,
        state_before: dict[str, Any] | None = None,
    ) -> AsyncIterator[Part]:
        assert self.mapper is not None or not parts
        for index, part in enumerate(parts):
            if index < self.skip:
                continue
            yield part
            assert self.mapper is not None
            last = index == len(parts) - 1
            position = UIStreamPosition(
                turn_id=self.mapper.turn_id,
                turn_start=self.turn_start,
                event_start=after if last else before,
                sent_parts=0 if last else index + 1,
                mapper=self.mapper.copy_state() if last or state_before is None else state_before,
            )
            yield resume_token_part(encode_ui_resume_token(position))
        if parts:
            self.skip = 0

    async def _snapshot(self) -> AgentSnapshot:
        return await self.client.invoke_rpc(self.flow.get_agent_snapshot, self.flow_id)

    async def _turn_committed_end(self) -> bool:
        """Whether the turn's end committed, waiting up to ``COMMIT_WAIT`` for it."""
        assert self.mapper is not None
        deadline = asyncio.get_running_loop().time() + COMMIT_WAIT.total_seconds()
        while True:
            snapshot = await self._snapshot()
            if _active_turn(snapshot) != self.mapper.turn_id:
                return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(_COMMIT_POLL_SECONDS)

    async def _after_event(self, kind: str, payload: Any) -> list[Part]:
        assert self.mapper is not None
        if kind in ("turn_completed", "turn_failed"):
            if not await self._turn_committed_end():
                return []  # a retry follows: keep reading
            if kind == "turn_completed":
                return self.mapper.finish("stop")
            error = (as_object(payload) or {}).get("error")
            return self.mapper.finish("error", str(error or "the turn failed"))
        if kind in _OTHER_END_EVENTS:
            return self.mapper.finish("other")
        if kind in _APPROVAL_CHECK_EVENTS:
            return await self.finish_if_awaiting_approval()
        return []

    async def finish_if_awaiting_approval(
        self, snapshot: AgentSnapshot | None = None
    ) -> list[Part]:
        """Finish with ``tool-calls`` when the turn waits only for approval answers."""
        if (
            not self.finish_when_awaiting_approval
            or self.mapper is None
            or not self.mapper.awaits_approval_answers
        ):
            return []
        snapshot = snapshot or await self._snapshot()
        if not _waits_only_for_approvals(snapshot, self.mapper.turn_id):
            return []
        finished = [
            (r.tool_call_id, ToolDetails(r.tool_name, r.arguments, r.status, r.output, r.error))
            for r in sorted(snapshot.tool_calls, key=lambda r: r.deferral_order)
            if r.turn_id == self.mapper.turn_id and r.is_final
        ]
        return self.mapper.settle(finished) + self.mapper.finish("tool-calls")

    async def _on_idle(self, idle_ended: int) -> tuple[list[Part], int]:
        """Check committed state while no event arrives: approvals, or a turn without events."""
        if self.mapper is None:
            if self.turns_before is None:
                return [], 0
            snapshot = await self._snapshot()
            if snapshot.state is None or snapshot.state.turn_count <= self.turns_before:
                return [], 0
            # The turn started but its events did not reach the Stream.
            self.mapper = UIPartMapper.for_turn(f"turn-{self.turns_before + 1}")
        snapshot = await self._snapshot()
        if _active_turn(snapshot) != self.mapper.turn_id:
            # Its end event may still be on its way: finish on the second idle read.
            if idle_ended >= 1:
                return self.mapper.finish("other"), 0
            return [], idle_ended + 1
        return await self.finish_if_awaiting_approval(snapshot), 0

    async def _tool_details(self, kind: str, payload: Any) -> ToolDetails | None:
        if kind not in _TOOL_EVENTS and kind != "interrupt_resolved":
            return None
        call_id = (as_object(payload) or {}).get("tool_call_id")
        if not isinstance(call_id, str):
            return None
        return await read_tool_details(
            self.client, self.flow, self.flow_id, call_id, final=kind == "tool_call_finished"
        )


async def read_tool_details(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    call_id: str,
    *,
    final: bool,
) -> ToolDetails | None:
    """The call's record once committed (final when ``final``), or its stored messages."""
    deadline = asyncio.get_running_loop().time() + COMMIT_WAIT.total_seconds()
    while True:
        snapshot: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
        record = next((r for r in snapshot.tool_calls if r.tool_call_id == call_id), None)
        if record is not None and (record.is_final or not final):
            return ToolDetails(
                record.tool_name, record.arguments, record.status, record.output, record.error
            )
        if record is None:
            stored = _stored_tool_details(snapshot, call_id)
            if stored is not None:
                return stored
        if asyncio.get_running_loop().time() >= deadline:
            if record is not None:
                return ToolDetails(record.tool_name, record.arguments, record.status)
            return None
        await asyncio.sleep(_COMMIT_POLL_SECONDS)


def _stored_tool_details(snapshot: AgentSnapshot, call_id: str) -> ToolDetails | None:
    """After the turn deleted its records: the request and result messages of the call."""
    request = next(
        (m for m in snapshot.messages if m.role == "assistant" and m.tool_call_id == call_id),
        None,
    )
    result = next(
        (m for m in snapshot.messages if m.role == "tool" and m.tool_call_id == call_id), None
    )
    if request is None and result is None:
        return None
    name = (request or result).tool_name or ""  # type: ignore[union-attr]
    return ToolDetails(
        name,
        request.tool_arguments if request is not None else None,
        AgentToolCallStatus.SUCCEEDED if result is not None else None,
        result.tool_output if result is not None else None,
    )


def _active_turn(snapshot: AgentSnapshot) -> str | None:
    return snapshot.state.active_turn_id if snapshot.state is not None else None


def _waits_only_for_approvals(snapshot: AgentSnapshot, turn_id: str) -> bool:
    """The turn is committed in its tool phase and every open call waits for an approval."""
    if _active_turn(snapshot) != turn_id or snapshot.state is None:
        return False
    if snapshot.state.status is not AgentStatus.RUNNING_TOOLS:
        return False
    pending = {
        i.tool_call_id
        for i in snapshot.pending_interrupts
        if i.turn_id == turn_id and i.kind is InterruptKind.APPROVAL
    }
    open_calls = [r for r in snapshot.tool_calls if r.turn_id == turn_id and not r.is_final]
    return bool(open_calls) and all(
        r.status is AgentToolCallStatus.AWAITING_APPROVAL and r.tool_call_id in pending
        for r in open_calls
    )


# --- the public generators -------------------------------------------------------------------


async def open_agent_ui_message_stream(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    *,
    resume_token: str | None = None,
    continue_after_resume_token: bool = False,
    finish_when_awaiting_approval: bool = True,
) -> AgentUIMessageStream | None:
    """The parts of the token's turn, or of the active turn; ``None`` when there is none.

    With a token, the stream replays that turn from its first retained event, or,
    with ``continue_after_resume_token``, continues right after the token's part
    (only while the browser still holds that message). A token whose Dex position
    is rejected replays the active turn instead. Reads once before returning.
    """
    position = decode_ui_resume_token(resume_token)
    if position is not None:
        if continue_after_resume_token:
            read_from, skip = position.event_start, position.sent_parts
            mapper = UIPartMapper.restore(position.mapper)
        else:
            read_from, skip = position.turn_start, 0
            mapper = UIPartMapper.for_turn(position.turn_id)
        try:
            reader = await EventReader.open(client, flow, flow_id, read_from)
        except ResumeTokenRejectedError:
            pass
        else:
            follow = _Follow(
                client,
                flow,
                flow_id,
                reader,
                mapper,
                position.turn_start,
                skip,
                finish_when_awaiting_approval,
            )
            return follow.parts()
    snapshot: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    turn_id = _active_turn(snapshot)
    if turn_id is None:
        return None
    start = await turn_start_position(client, flow, flow_id, turn_id)
    reader = await EventReader.open(client, flow, flow_id, start.token)
    follow = _Follow(
        client,
        flow,
        flow_id,
        reader,
        UIPartMapper.for_turn(turn_id),
        start.token,
        finish_when_awaiting_approval=finish_when_awaiting_approval,
    )
    return follow.parts()


async def send_agent_user_message_with_ui_message_stream(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    text: str,
    *,
    finish_when_awaiting_approval: bool = True,
) -> AgentUIMessageStream:
    """Send ``text`` and stream the next turn that starts.

    Raises ``ValueError`` when the session does not accept the message (blank text).
    """
    position = await latest_position(client, flow, flow_id)
    before: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    accepted = await client.invoke_rpc(flow.send_user_message, flow_id, AgentUserMessage(text=text))
    if not accepted:
        raise ValueError("the session did not accept the message: its text is blank")
    reader = await EventReader.open(client, flow, flow_id, position)
    follow = _Follow(
        client,
        flow,
        flow_id,
        reader,
        None,
        position,
        finish_when_awaiting_approval=finish_when_awaiting_approval,
        turns_before=before.state.turn_count if before.state is not None else 0,
    )
    return follow.parts()


@dataclass(frozen=True)
class AgentToolApprovalResponse:
    """A decision from the browser, bound to the turn of the message it came from."""

    approval_id: str
    approved: bool
    turn_id: str | None
    reason: str | None = None


def read_agent_tool_approval_responses(message: Any) -> list[AgentToolApprovalResponse]:
    """The approval answers in an assistant ``UIMessage`` (state ``approval-responded``).

    Each is bound to the turn named by the message ID (``<turn_id>-assistant``);
    a message with another ID yields decisions bound to no turn, which are not applied.
    """
    fields = as_object(message)
    if fields is None:
        return []
    identifier = fields.get("id")
    suffix = assistant_message_id("")
    turn_id = (
        identifier[: -len(suffix)]
        if isinstance(identifier, str) and identifier.endswith(suffix)
        else None
    )
    responses: list[AgentToolApprovalResponse] = []
    for item in as_list(fields.get("parts")):
        part = as_object(item)
        if part is None or part.get("state") != "approval-responded":
            continue
        approval = as_object(part.get("approval")) or {}
        approval_id, approved = approval.get("id"), approval.get("approved")
        reason = approval.get("reason")
        if isinstance(approval_id, str) and isinstance(approved, bool):
            responses.append(
                AgentToolApprovalResponse(
                    approval_id, approved, turn_id, reason if isinstance(reason, str) else None
                )
            )
    return responses


async def _resolve(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, request: ResolveInterruptInput
) -> bool:
    for attempt in range(_LOCK_CONFLICT_RETRIES):
        try:
            return await client.invoke_rpc(flow.resolve_interrupt, flow_id, request)
        except dex.RpcLockConflictError:
            if attempt == _LOCK_CONFLICT_RETRIES - 1:
                raise
            await asyncio.sleep(_COMMIT_POLL_SECONDS * (attempt + 1))
    return False


def _is_pending_approval(
    snapshot: AgentSnapshot, turn_id: str | None, approval_id: str, decision_turn_id: str | None
) -> bool:
    """Whether a decision bound to ``decision_turn_id`` answers an approval pending in the
    active turn ``turn_id`` of ``snapshot``."""
    interrupt = next(
        (i for i in snapshot.pending_interrupts if i.interrupt_id == approval_id), None
    )
    return (
        turn_id is not None
        and decision_turn_id == turn_id
        and interrupt is not None
        and interrupt.turn_id == turn_id
        and interrupt.kind is InterruptKind.APPROVAL
    )


async def resolve_agent_tool_approval(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    approval_id: str,
    approved: bool,
    *,
    reason: str | None = None,
    turn_id: str | None = None,
) -> bool:
    """Resolve one tool approval from an endpoint of your own; ``True`` when applied.

    For a UI message stream opened with ``finish_when_awaiting_approval=False``, which
    stays open while the turn waits and shows the answer when it arrives. It applies
    the decision only when ``approval_id`` is an approval (not a question) pending in
    the session's active turn, and, with ``turn_id`` (the turn of the message the
    decision came from), only when that turn is the active one, so a decision from a
    stale page is dropped. ``reason`` is the rejection message. A lock conflict of
    ``resolve_interrupt`` is retried. Authorize the caller for the session first.
    """
    snapshot: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    active = _active_turn(snapshot)
    bound_to = turn_id if turn_id is not None else active
    if not _is_pending_approval(snapshot, active, approval_id, bound_to):
        return False
    return await _resolve(
        client,
        flow,
        flow_id,
        ResolveInterruptInput(
            interrupt_id=approval_id, approved=approved, rejection_message=reason
        ),
    )


async def resolve_agent_tool_approvals_with_ui_message_stream(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    approvals: Sequence[AgentToolApprovalResponse],
    *,
    finish_when_awaiting_approval: bool = True,
) -> AgentUIMessageStream:
    """Apply the decisions pending in the active turn, then stream the rest of the turn.

    Reads at most ``MAX_APPROVAL_DECISIONS`` decisions and keeps the first per
    approval ID. A decision that is not pending in the active turn is not applied;
    its call gets its outcome (or an error) so the browser does not send it again.
    """
    position = await latest_position(client, flow, flow_id)
    snapshot: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    turn_id = _active_turn(snapshot)
    seen: set[str] = set()
    stale: list[AgentToolApprovalResponse] = []
    for decision in list(approvals)[:MAX_APPROVAL_DECISIONS]:
        if decision.approval_id in seen:
            continue
        seen.add(decision.approval_id)
        applied = _is_pending_approval(
            snapshot, turn_id, decision.approval_id, decision.turn_id
        ) and (
            await _resolve(
                client,
                flow,
                flow_id,
                ResolveInterruptInput(
                    interrupt_id=decision.approval_id,
                    approved=decision.approved,
                    rejection_message=decision.reason,
                ),
            )
        )
        if not applied:
            stale.append(decision)
    stale_parts = [await _stale_decision_part(client, flow, flow_id, d) for d in stale]
    still_open = [
        i.interrupt_id
        for i in snapshot.pending_interrupts
        if i.turn_id == turn_id
        and i.kind is InterruptKind.APPROVAL
        and (i.interrupt_id not in seen or any(d.approval_id == i.interrupt_id for d in stale))
    ]
    known = [
        part["toolCallId"]
        for message in convert_agent_snapshot_to_ui_messages(snapshot)
        if turn_id is not None and message["id"] == assistant_message_id(turn_id)
        for part in message["parts"]
        if "toolCallId" in part
    ]
    return _resolved_stream(
        client,
        flow,
        flow_id,
        turn_id,
        position,
        known,
        still_open,
        stale_parts,
        finish_when_awaiting_approval,
    )


async def _stale_decision_part(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str, decision: Any
) -> Part:
    details = await read_tool_details(client, flow, flow_id, decision.approval_id, final=False)
    if details is not None and details.status is not None and details.status.is_final:
        return tool_outcome_part(decision.approval_id, details.status, details)
    return {
        "type": "tool-output-error",
        "toolCallId": decision.approval_id,
        "errorText": "the approval was not applied: it is not pending in the active turn",
        "dynamic": True,
    }


async def _resolved_stream(
    client: dex.AsyncClient,
    flow: AgentSessionFlow,
    flow_id: str,
    turn_id: str | None,
    position: str,
    known: list[str],
    still_open: list[str],
    stale_parts: list[Part],
    finish_when_awaiting_approval: bool,
) -> AgentUIMessageStream:
    mapper = UIPartMapper.continuing(turn_id or "", known, still_open)
    for part in stale_parts:
        yield part
    if turn_id is None:
        yield {"type": "finish", "finishReason": "other"}
        return
    reader = await EventReader.open(client, flow, flow_id, position)
    start = await turn_start_position(client, flow, flow_id, turn_id)
    follow = _Follow(
        client,
        flow,
        flow_id,
        reader,
        mapper,
        start.token,
        finish_when_awaiting_approval=finish_when_awaiting_approval,
    )
    async for part in follow.parts():
        yield part


# --- the chat as UIMessage objects -------------------------------------------------------------


@dataclass(frozen=True)
class AgentSessionUIMessages:
    """The stored messages and the active turn's resume token (``None``: no active turn,
    or its events are not in the Stream; poll until the turn ends)."""

    messages: list[dict[str, Any]]
    resume_token: str | None

    def to_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "resumeToken": self.resume_token}


async def read_agent_session_ui_messages(
    client: dex.AsyncClient, flow: AgentSessionFlow, flow_id: str
) -> AgentSessionUIMessages:
    """The session's messages as AI SDK UI messages, from one committed snapshot."""
    snapshot: AgentSnapshot = await client.invoke_rpc(flow.get_agent_snapshot, flow_id)
    messages = convert_agent_snapshot_to_ui_messages(snapshot)
    turn_id = _active_turn(snapshot)
    if turn_id is None:
        return AgentSessionUIMessages(messages, None)
    start = await turn_start_position(client, flow, flow_id, turn_id)
    if not start.found:
        return AgentSessionUIMessages(messages, None)
    token = encode_ui_resume_token(
        UIStreamPosition(turn_id, start.token, start.token, 0, UIPartMapper.for_turn(turn_id).state)
    )
    return AgentSessionUIMessages(messages, token)


FinishReasons: tuple[FinishReason, ...] = ("stop", "error", "tool-calls", "other")
