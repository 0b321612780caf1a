"""RPC handlers of turn control and plans: ``steer_user_message``, ``delete_queued_message``,
``cancel_turn`` and ``execute_plan``. ``flow.py`` binds them with their locks and loads."""

from __future__ import annotations

from datetime import UTC, datetime

from dex import Context, RPCResult, StepMovement

from dex_agents._values import (
    AgentUserMessage,
    CancelTurnInput,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    PlanExecutionRequest,
    SteerUserMessageInput,
    TurnCancellationRequest,
    TurnControlRequest,
    format_timestamp,
    plan_execution_key,
)
from dex_agents.session._approvals import AwaitToolApproval
from dex_agents.session._cancellation import FinishTurnCancellation, finish_cancellation_options
from dex_agents.session._compaction_step import CompactContext
from dex_agents.session._control_reads import read_cancellation_request, read_plan
from dex_agents.session._options import DEFAULT_MAX_USER_MESSAGE_BYTES
from dex_agents.session._persistence import SessionPersistence
from dex_agents.session._plan_rules import accepts_plan_execution
from dex_agents.session._questions import AwaitQuestionAnswer
from dex_agents.session._read_rules import text_fits
from dex_agents.session._store import (
    SessionDefinition,
    read_optional,
    read_pending_interrupts,
    read_state,
)
from dex_agents.session._timers import AwaitTimer
from dex_agents.session._tool_tasks import PollToolTask
from dex_agents.session._turn import RecordTurnFailure, RunModel

__all__ = ["cancel_turn", "delete_queued_message", "execute_plan", "steer_user_message"]


def is_channel_message_id(message_id: str) -> bool:
    """Whether ``message_id`` can name a Channel message: Dex refuses a blank name or
    one with ``/``, so such an ID names no queued message."""
    return bool(message_id.strip()) and "/" not in message_id


def steer_user_message(
    context: Context,
    persistence: SessionPersistence,
    request: SteerUserMessageInput,
    max_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES,
) -> RPCResult[bool]:
    """Steer the active turn with new text or with a queued message (moved by its ID).

    While no turn is active, ``text`` is queued like ``send_user_message``. ``False`` for
    both or neither set, blank text, a message no longer queued, or a turn that does not
    accept steering. The RPC is transactional: a queued message that the session consumes
    meanwhile fails it with ``ChannelMessageNotFoundError`` and changes nothing.
    """
    message_id, text = request.message_id, request.text
    if (message_id is None) == (text is None):
        return RPCResult(False)
    if text is not None and (not text.strip() or not text_fits(text, max_bytes)):
        return RPCResult(False)
    if message_id is not None and not is_channel_message_id(message_id):
        return RPCResult(False)
    state = read_state(context, persistence)
    turn_id = state.active_turn_id if state is not None else None
    if state is None or turn_id is None:
        if text is None:
            return RPCResult(False)
        persistence.queued_user_messages.publish(context, AgentUserMessage(text=text))
        return RPCResult(True)
    cancellation = read_cancellation_request(context, persistence)
    if not state.accepts_turn_control or (
        cancellation is not None and cancellation.turn_id == turn_id
    ):
        return RPCResult(False)
    if message_id is not None:
        queued = persistence.queued_user_messages.find_pending_message(context, message_id)
        if queued is None:
            return RPCResult(False)
        persistence.queued_user_messages.delete(context, message_id)
        steered = queued.value
    else:
        assert text is not None
        steered = AgentUserMessage(text=text)
    persistence.steered_user_messages.publish(context, steered)
    persistence.turn_control_requests.publish(context, TurnControlRequest())
    return RPCResult(True)


def delete_queued_message(
    context: Context, persistence: SessionPersistence, request: DeleteQueuedMessageInput
) -> RPCResult[bool]:
    """Delete a queued message; ``False`` when it is no longer queued (transactional)."""
    message_id = request.message_id
    if not is_channel_message_id(message_id):
        return RPCResult(False)
    if persistence.queued_user_messages.find_pending_message(context, message_id) is None:
        return RPCResult(False)
    persistence.queued_user_messages.delete(context, message_id)
    return RPCResult(True)


def cancel_turn(
    context: Context, session: SessionDefinition, request: CancelTurnInput
) -> RPCResult[bool]:
    """Stop the active turn now (runs under ``TurnCancellationRequest`` and ``PendingInterrupts``).

    Records the request, cancels the turn's model call and every waiting Step, and
    moves to ``FinishTurnCancellation``. ``False`` when no turn is active, ``turn_id``
    names another turn, or the turn does not accept cancellation; a second call for
    the same turn returns ``True`` and changes nothing.
    """
    persistence = session.persistence
    state = read_state(context, persistence)
    turn_id = state.active_turn_id if state is not None else None
    if state is None or turn_id is None or not state.accepts_turn_control:
        return RPCResult(False)
    if request.turn_id is not None and request.turn_id != turn_id:
        return RPCResult(False)
    existing = read_cancellation_request(context, persistence)
    if existing is not None and existing.turn_id == turn_id:
        return RPCResult(True)
    persistence.turn_cancellation_request.set(
        context,
        TurnCancellationRequest(turn_id=turn_id, requested_at=format_timestamp(datetime.now(UTC))),
    )
    finish = StepMovement[str](
        FinishTurnCancellation, turn_id, finish_cancellation_options(session)
    )
    result = RPCResult(True, next_steps=(finish,))
    return result.with_canceling_steps(
        RunModel,
        CompactContext,
        RecordTurnFailure,
        AwaitToolApproval,
        AwaitQuestionAnswer,
        AwaitTimer,
        PollToolTask,
    )


def execute_plan(
    context: Context, persistence: SessionPersistence, request: ExecutePlanInput
) -> RPCResult[bool]:
    """Approve a plan revision (runs under the ``PendingPlanExecution`` lock).

    ``True`` only while the session waits for a user message, the plan has this
    revision and is ``draft`` or ``active``, no execution is pending, and nothing is
    queued, steered or pending. ``AwaitUserMessage`` then starts the executing turn.
    """
    if type(request.revision) is not int or request.revision < 1:
        return RPCResult(False)
    approval = PlanExecutionRequest(revision=request.revision)
    accepted = accepts_plan_execution(
        approval,
        state=read_state(context, persistence),
        plan=read_plan(context, persistence),
        pending=read_optional(persistence.pending_plan_execution, context),
        queued_count=persistence.queued_user_messages.size(context),
        steered_count=persistence.steered_user_messages.size(context),
        pending_interrupt_count=len(read_pending_interrupts(context, persistence)),
    )
    if not accepted:
        return RPCResult(False)
    persistence.pending_plan_execution.set(context, approval)
    persistence.plan_executions.publish(context, plan_execution_key(request.revision), approval)
    return RPCResult(True)
