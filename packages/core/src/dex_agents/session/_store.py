"""Reading session values from a Dex Context and applying ``SessionChanges`` to it.

This is the only place that maps the session's values onto Dex Attributes,
Channels and the event Stream; Steps and RPCs call it instead of touching the
definitions one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar, cast

from dex import AsyncContext, Attribute, Context, Step

from dex_agents._contract import AgentEventWriter, AgentFrameworkRunner
from dex_agents._storage import assemble_messages, chunk_keys_after, plan_message_storage
from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentMessageIndex,
    AgentState,
    AgentToolCall,
    AgentUsage,
    CompactContextInput,
    ContextSummary,
    ToolCallCancellation,
    ToolCallCompleted,
    TurnReplySequence,
    message_sequence_key,
)
from dex_agents.session._changes import SessionChanges
from dex_agents.session._committed_reads import CommittedReads, Kind, read_each
from dex_agents.session._events import SessionEventWriter
from dex_agents.session._options import AgentSessionOptions
from dex_agents.session._persistence import SessionPersistence

__all__ = [
    "SessionDefinition",
    "SessionSteps",
    "apply_changes",
    "commit_changes",
    "read_context_summary",
    "read_message_index",
    "read_messages",
    "read_optional",
    "read_pending_interrupts",
    "read_record",
    "read_records",
    "read_reply_sequence",
    "read_run_state",
    "read_state",
    "read_usage",
    "store_messages",
]

ValueT = TypeVar("ValueT")
CancellationReason = Literal["steered", "turn_cancelled"]


@dataclass(frozen=True)
class SessionSteps:
    """The Step types that a Step of a lower module moves to (see ``session._moves``).

    The session's Steps move to one another in cycles, while their modules import in
    one direction only; ``create_agent_session_flow`` fills this table in.
    """

    apply_turn_control: type[Step[None]]
    compact_context: type[Step[CompactContextInput]]
    await_question_answer: type[Step[str]]
    poll_tool_task: type[Step[str]]


@dataclass(frozen=True)
class SessionDefinition:
    """What every Step and RPC of one session Flow shares."""

    flow_type: str
    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    persistence: SessionPersistence
    steps: SessionSteps
    # Model Steps' earlier reads of stored messages in this Worker (a cache, not state).
    committed_reads: CommittedReads = field(default_factory=CommittedReads, compare=False)


def read_optional(attribute: Attribute[ValueT], context: Context) -> ValueT | None:
    """The Attribute's value, or ``None`` while it is unset."""
    try:
        return attribute.get(context)
    except KeyError:
        return None


def read_state(context: Context, persistence: SessionPersistence) -> AgentState | None:
    return read_optional(persistence.agent_state, context)


def read_usage(context: Context, persistence: SessionPersistence) -> AgentUsage:
    usage = read_optional(persistence.agent_usage, context)
    return usage if usage is not None else AgentUsage()


def read_run_state(context: Context, persistence: SessionPersistence) -> str | None:
    return read_optional(persistence.framework_run_state, context)


def read_reply_sequence(
    context: Context, persistence: SessionPersistence
) -> TurnReplySequence | None:
    return read_optional(persistence.turn_reply_sequence, context)


def read_pending_interrupts(
    context: Context, persistence: SessionPersistence
) -> tuple[AgentInterrupt, ...]:
    pending = read_optional(persistence.pending_interrupts, context)
    return tuple(pending) if pending is not None else ()


def read_message_index(
    context: Context, persistence: SessionPersistence
) -> AgentMessageIndex | None:
    return read_optional(persistence.agent_message_index, context)


def read_context_summary(
    context: Context, persistence: SessionPersistence
) -> ContextSummary | None:
    return read_optional(persistence.context_summary, context)


def read_messages(
    context: Context,
    persistence: SessionPersistence,
    *,
    after_sequence: int | None = None,
    seen: CommittedReads | None = None,
) -> list[AgentMessage]:
    """The stored messages after ``after_sequence`` in sequence order, from the window and
    the chunks; the Step must load ``AgentMessages`` and every chunk that holds a message
    after ``after_sequence`` (``model_input_chunk_keys`` names them).

    With ``seen``, values this Worker read before in the same run are not read again;
    pass it only from a Step that has not written messages yet (see ``committed_reads``).
    """
    window = persistence.agent_messages
    chunk_map = persistence.agent_message_chunks
    floor = 0 if after_sequence is None else after_sequence
    # Window keys are zero-padded sequences, so older ones are skipped without decoding.
    window_keys = [key for key in sorted(window.get_all_instance_keys(context)) if int(key) > floor]
    index = read_message_index(context, persistence)
    chunk_keys = chunk_keys_after(index, after_sequence)

    def read_all(kind: Kind, keys: list[str], load: Callable[[str], ValueT]) -> dict[str, ValueT]:
        # A chunk deleted in this commit is left out.
        return read_each(keys, load) if seen is None else seen.read(context, kind, keys, load)

    stored = list(read_all("window", window_keys, lambda key: window.get(context, key)).values())
    chunks = read_all("chunk", chunk_keys, lambda key: chunk_map.get(context, key))
    return assemble_messages(index, stored, chunks, after_sequence=after_sequence)


def store_messages(
    context: Context,
    persistence: SessionPersistence,
    appended: list[AgentMessage],
    *,
    message_count: int,
) -> None:
    """Append ``appended`` through the window, rolling older messages into chunks and
    applying retention in this commit; the Step must load ``AgentMessages``."""
    window = persistence.agent_messages
    keys = window.get_all_instance_keys(context)
    plan = plan_message_storage(
        index=read_message_index(context, persistence),
        window_keys=[int(key) for key in keys],
        load_window_message=lambda sequence: window.get(context, message_sequence_key(sequence)),
        appended=appended,
        message_count=message_count,
        summary=read_context_summary(context, persistence),
        settings=persistence.message_storage,
    )
    for message in plan.window_writes:
        window.set(context, message_sequence_key(message.sequence), message)
    for key in plan.window_deletes:
        window.delete(context, key)
    for key, chunk in plan.chunk_writes.items():
        persistence.agent_message_chunks.set(context, key, chunk)
    for key in plan.chunk_deletes:
        persistence.agent_message_chunks.delete(context, key)
    if plan.index is not None:
        persistence.agent_message_index.set(context, plan.index)


def read_records(context: Context, persistence: SessionPersistence) -> list[AgentToolCall]:
    """The active turn's records in deferral order; the Step must load ``AgentToolCalls``."""
    records = persistence.agent_tool_calls
    stored = [records.get(context, key) for key in records.get_all_instance_keys(context)]
    return sorted(stored, key=lambda record: record.deferral_order)


def read_record(
    context: Context, persistence: SessionPersistence, tool_call_id: str
) -> AgentToolCall | None:
    """One record; the Step must load its ``AgentToolCalls`` instance."""
    try:
        return persistence.agent_tool_calls.get(context, tool_call_id)
    except KeyError:
        return None


def apply_changes(
    context: Context,
    persistence: SessionPersistence,
    changes: SessionChanges,
    events: AgentEventWriter | None,
) -> None:
    """Stage every write of ``changes`` in the handler result and write its events."""
    if changes.state is not None:
        persistence.agent_state.set(context, changes.state)
    if changes.appended_messages:
        message_count = (
            changes.state.message_count
            if changes.state is not None
            else changes.appended_messages[-1].sequence
        )
        store_messages(context, persistence, changes.appended_messages, message_count=message_count)
    for record in changes.written_records:
        persistence.agent_tool_calls.set(context, record.tool_call_id, record)
    for tool_call_id in changes.deleted_record_ids:
        persistence.agent_tool_calls.delete(context, tool_call_id)
    if changes.pending_interrupts is not None:
        persistence.pending_interrupts.set(context, tuple(changes.pending_interrupts))
    if changes.framework_run_state_changed:
        if changes.framework_run_state is None:
            persistence.framework_run_state.delete(context)
        else:
            persistence.framework_run_state.set(context, changes.framework_run_state)
    if changes.usage is not None:
        persistence.agent_usage.set(context, changes.usage)
    if changes.reply_sequence is not None:
        persistence.turn_reply_sequence.set(context, changes.reply_sequence)
    for tool_call_id in changes.completed_tool_calls:
        persistence.tool_call_results.publish(context, ToolCallCompleted(tool_call_id=tool_call_id))
    if changes.plan is not None:
        persistence.agent_plan.set(context, changes.plan)
    for tool_call_id, reason in changes.tool_call_cancellations.items():
        persistence.tool_call_cancellations.publish(
            context, tool_call_id, ToolCallCancellation(reason=cast("CancellationReason", reason))
        )
    if events is not None:
        for event in changes.events:
            events.write_event(event.type, event.payload)


def commit_changes(
    context: AsyncContext, persistence: SessionPersistence, changes: SessionChanges, *, turn_id: str
) -> None:
    """``apply_changes`` for a Step that runs no runner code: its events go to ``turn_id``
    through a writer that is closed at once, so buffered deltas are written and later
    writes are dropped."""
    events = SessionEventWriter(context, persistence.agent_events, turn_id=turn_id)
    try:
        apply_changes(context, persistence, changes, events)
    finally:
        events.close()
