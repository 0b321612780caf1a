"""RPC handlers of the session; ``flow.py`` binds them to each Flow with its locks and loads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from dex import ChannelMessage, Context, RPCResult

from dex_agents._session_settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    read_session_settings,
    session_settings_error,
    store_session_settings,
)
from dex_agents._storage import deleted_before_sequence
from dex_agents._values import (
    AgentInterrupt,
    AgentSnapshot,
    AgentUserMessage,
    AnswerQuestionInput,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    QueuedUserMessage,
    ResolveInterruptInput,
    UpdateSessionSettingsInput,
)
from dex_agents.session._approval_rules import decide_resolve_interrupt
from dex_agents.session._builtin_rules import decide_answer_question
from dex_agents.session._control_reads import read_plan
from dex_agents.session._interrupts import InterruptDecision
from dex_agents.session._options import DEFAULT_MAX_USER_MESSAGE_BYTES
from dex_agents.session._persistence import SessionPersistence
from dex_agents.session._read_rules import (
    accepts_user_message,
    build_snapshot,
    page_messages,
    text_fits,
)
from dex_agents.session._store import (
    read_context_summary,
    read_message_index,
    read_messages,
    read_pending_interrupts,
    read_records,
    read_state,
    read_usage,
)

__all__ = [
    "answer_question",
    "get_agent_snapshot",
    "list_agent_messages",
    "resolve_interrupt",
    "send_user_message",
    "update_session_settings",
]


def send_user_message(
    context: Context,
    persistence: SessionPersistence,
    message: AgentUserMessage,
    max_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES,
    *,
    plan_mode_enabled: bool = False,
) -> RPCResult[bool]:
    """Queue a message; it starts the next turn.

    Blank text, text storing in more than ``max_bytes``, and a ``plan_mode`` message while
    plan mode is off return ``False``: a message that could not be stored is refused here,
    not accepted and then stuck.
    """
    if not accepts_user_message(message, max_bytes=max_bytes, plan_mode_enabled=plan_mode_enabled):
        return RPCResult(False)
    persistence.queued_user_messages.publish(
        context, AgentUserMessage(text=message.text, plan_mode=message.plan_mode)
    )
    return RPCResult(True)


def resolve_interrupt(
    context: Context,
    persistence: SessionPersistence,
    request: ResolveInterruptInput,
    max_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES,
) -> RPCResult[bool]:
    """Approve or reject a pending interrupt before its deadline (runs under its lock).

    ``False`` also for a rejection message storing in more than ``max_bytes``.
    """
    if request.rejection_message is not None and not text_fits(
        request.rejection_message, max_bytes
    ):
        return RPCResult(False)
    return _resolve(
        context,
        persistence,
        request.interrupt_id,
        lambda pending: decide_resolve_interrupt(pending, request, datetime.now(UTC)),
    )


def answer_question(
    context: Context,
    persistence: SessionPersistence,
    request: AnswerQuestionInput,
    max_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES,
) -> RPCResult[bool]:
    """Answer a pending question before its deadline (runs under the ``PendingInterrupts`` lock).

    ``False`` when not pending, not a question, past its deadline, blank, storing in
    more than ``max_bytes``, or outside ``choices`` while free text is not allowed.
    """
    if not text_fits(request.answer, max_bytes):
        return RPCResult(False)
    return _resolve(
        context,
        persistence,
        request.interrupt_id,
        lambda pending: decide_answer_question(pending, request, datetime.now(UTC)),
    )


def _resolve(
    context: Context,
    persistence: SessionPersistence,
    interrupt_id: str,
    decide: Callable[[tuple[AgentInterrupt, ...]], InterruptDecision],
) -> RPCResult[bool]:
    """Remove the interrupt and publish its resolution when ``decide`` accepts the request."""
    if not interrupt_id or "/" in interrupt_id:
        return RPCResult(False)
    decision = decide(read_pending_interrupts(context, persistence))
    if not decision.accepted or decision.resolution is None:
        return RPCResult(False)
    persistence.pending_interrupts.set(context, decision.pending)
    persistence.interrupt_resolutions.publish(context, interrupt_id, decision.resolution)
    return RPCResult(True)


def get_agent_snapshot(
    context: Context, persistence: SessionPersistence
) -> RPCResult[AgentSnapshot]:
    """One committed view: state, messages, interrupts, records, usage, queued messages."""
    queued = listed_messages(persistence.queued_user_messages.pending_messages(context))
    steered = listed_messages(persistence.steered_user_messages.pending_messages(context))
    return RPCResult(
        build_snapshot(
            state=read_state(context, persistence),
            messages=read_messages(context, persistence),
            pending_interrupts=read_pending_interrupts(context, persistence),
            records=read_records(context, persistence),
            usage=read_usage(context, persistence),
            queued_messages=queued,
            context_summary=read_context_summary(context, persistence),
            session_settings=read_session_settings(persistence.session_settings, context)[0],
            plan=read_plan(context, persistence),
            steered_messages=steered,
        )
    )


def update_session_settings(
    context: Context, persistence: SessionPersistence, request: UpdateSessionSettingsInput
) -> RPCResult[bool]:
    """Replace the session settings (``{}`` clears them); the next turn uses them.

    ``False`` before the session initialized, for ``null``, and for settings that are
    not a JSON object or pass the size limit with its tolerance.
    """
    if read_state(context, persistence) is None:
        return RPCResult(False)
    settings = request.session_settings
    if settings is None or session_settings_error(
        settings, tolerance=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
    ):
        return RPCResult(False)
    store_session_settings(persistence.session_settings, context, settings)
    return RPCResult(True)


def listed_messages(
    pending: Sequence[ChannelMessage[AgentUserMessage]],
) -> list[QueuedUserMessage]:
    """Pending Channel messages as a snapshot lists them, with their message IDs."""
    return [
        QueuedUserMessage(
            message_id=message.message_id,
            text=message.value.text,
            plan_mode=message.value.plan_mode,
        )
        for message in pending
    ]


def list_agent_messages(
    context: Context, persistence: SessionPersistence, request: ListAgentMessagesInput
) -> RPCResult[ListAgentMessagesOutput]:
    """A page of stored messages, oldest first."""
    return RPCResult(
        page_messages(
            read_messages(context, persistence),
            request,
            deleted_before_sequence=deleted_before_sequence(
                read_message_index(context, persistence)
            ),
        )
    )
