"""Movements into the Steps that their movers' modules do not import.

The session's Steps move to one another in cycles (``RunModel`` -> ``ApplyTurnControl``
-> ``RunModel``; ``CallTool`` -> ``AwaitQuestionAnswer`` -> ``CallTool``), while their
modules import in one direction only. A Step that moves to a Step of a module above
its own builds the movement here: the per-movement options, and the Step type from
``SessionDefinition.steps``, which ``create_agent_session_flow`` fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from dex import (
    AsyncContext,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    go_to,
    go_to_many,
)

from dex_agents._storage import chunk_keys_after
from dex_agents._values import AgentMessageIndex, AgentToolCall, ContextSummary
from dex_agents.session._failure_routes import (
    RECORD_RETRY,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
    record_options,
)
from dex_agents.session._routing import ToolStepKind, tool_step_kind
from dex_agents.session._store import (
    SessionDefinition,
    read_context_summary,
    read_message_index,
)

__all__ = [
    "POLL_ATTEMPTS",
    "POLL_HEARTBEAT_TIMEOUT",
    "POLL_METHOD_TIMEOUT",
    "apply_turn_control_options",
    "go_to_apply_turn_control",
    "go_to_model_input_step",
    "model_input_chunk_keys",
    "poll_movement",
    "question_movement",
    "question_options",
]

POLL_ATTEMPTS = 3
POLL_METHOD_TIMEOUT = timedelta(minutes=15)
POLL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)


# --- model input ---------------------------------------------------------------------


def model_input_chunk_keys(
    session: SessionDefinition,
    index: AgentMessageIndex | None,
    summary: ContextSummary | None,
) -> list[str] | None:
    """The chunks a model-input Step loads: those after the summary, or ``None`` for all.

    Only a compacting session's model input starts after the summary; without
    compaction it covers every message, so every chunk loads.
    """
    if session.options.compaction is None or summary is None:
        return None
    return chunk_keys_after(index, summary.last_sequence)


def go_to_model_input_step(
    session: SessionDefinition,
    context: AsyncContext,
    step: type[Step[None]],
    options: Callable[[SessionDefinition, Sequence[str]], StepOptions],
) -> StepDecision:
    """Move to ``step``, a Step that reads the model input, loading only the chunks that
    input needs (after this commit), with ``options(session, chunk_keys)``."""
    persistence = session.persistence
    keys = model_input_chunk_keys(
        session,
        read_message_index(context, persistence),
        read_context_summary(context, persistence),
    )
    if keys is None:
        return go_to(step, None)
    return go_to_many(StepMovement[None](step, None, options(session, keys)))


# --- ApplyTurnControl ----------------------------------------------------------------


def apply_turn_control_options(
    session: SessionDefinition, chunk_keys: Sequence[str] | None
) -> StepOptions:
    """``ApplyTurnControl`` loads the window, the turn's records and the chunks
    ``chunk_keys`` names (every chunk for ``None``), as ``RunModel`` does."""
    persistence = session.persistence
    maps = (persistence.agent_tool_calls, persistence.agent_messages)
    chunks = persistence.agent_message_chunks
    return StepOptions(
        execute_retry=RECORD_RETRY,
        execute_load_attribute_maps=maps if chunk_keys is not None else (*maps, chunks),
        execute_load_attribute_map_instances=tuple(chunks.load(key) for key in chunk_keys or ()),
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
    )


def go_to_apply_turn_control(
    session: SessionDefinition, context: AsyncContext | None = None
) -> StepDecision:
    """Move to ``ApplyTurnControl``; with ``context`` it loads only the chunks the model
    input needs (after this commit), else every chunk."""
    step = session.steps.apply_turn_control
    if context is None:
        return go_to(step, None)
    return go_to_model_input_step(session, context, step, apply_turn_control_options)


# --- AwaitQuestionAnswer -------------------------------------------------------------


def question_options(session: SessionDefinition, tool_call_id: str) -> StepOptions:
    """Locks ``PendingInterrupts`` in Execute; Execute sees the turn's records for ID clashes."""
    persistence = session.persistence
    records = persistence.agent_tool_calls
    return StepOptions(
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        execute_lock_attributes=(persistence.pending_interrupts.lock(),),
        wait_for_load_attribute_map_instances=(records.load(tool_call_id),),
        execute_load_attribute_maps=(records,),
    )


def question_movement(session: SessionDefinition, tool_call_id: str) -> StepMovement[str]:
    """The movement into ``AwaitQuestionAnswer`` for the question of ``tool_call_id``."""
    return StepMovement[str](
        session.steps.await_question_answer, tool_call_id, question_options(session, tool_call_id)
    )


# --- PollToolTask --------------------------------------------------------------------


def _poll_options(
    session: SessionDefinition, record_effect_kind: ToolStepKind, call_id: str
) -> StepOptions:
    records = session.persistence.agent_tool_calls
    options = StepOptions(
        execute_method_timeout=POLL_METHOD_TIMEOUT,
        heartbeat_timeout=POLL_HEARTBEAT_TIMEOUT,
        execute_retry=RetryPolicy(maximum_attempts=POLL_ATTEMPTS),
        execute_durability=StepDurability.SYNC,
        wait_for_durability=StepDurability.SYNC,
        wait_for_load_attribute_map_instances=(records.load(call_id),),
        execute_load_attribute_map_instances=(records.load(call_id),),
    )
    # The task may still run, so a single-attempt call's poll failure is outcome_unknown.
    route = (
        RecordToolFailure
        if record_effect_kind is ToolStepKind.CALL_TOOL
        else RecordToolOutcomeUnknown
    )
    return options.on_execute_failure_proceed_to(route, record_options(session, call_id))


def poll_movement(session: SessionDefinition, record: AgentToolCall) -> StepMovement[str]:
    """The movement into ``PollToolTask`` for ``record``, with its effect's failure route."""
    call_id = record.tool_call_id
    return StepMovement[str](
        session.steps.poll_tool_task,
        call_id,
        _poll_options(session, tool_step_kind(record.effect), call_id),
    )
