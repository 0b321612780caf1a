"""``AwaitQuestionAnswer``: a question of ``ask_user`` or of a tool waits for its answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepDurability,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)

from dex_agents.session._builtin_rules import is_ask_user_call, question_interrupt_id
from dex_agents.session._control_reads import is_turn_cancelled
from dex_agents.session._moves import poll_movement, question_movement
from dex_agents.session._question_rules import (
    QuestionOutcome,
    apply_question_resolution,
    apply_question_timer,
    question_wait_seconds,
)
from dex_agents.session._routing import ToolStepKind
from dex_agents.session._store import (
    SessionDefinition,
    commit_changes,
    read_pending_interrupts,
    read_record,
    read_records,
)
from dex_agents.session._tool_tasks import cancel_task_movement
from dex_agents.session._tools import tool_step_movement
from dex_agents.session._wait_cancellation import cancellation_condition, cancelled_wait

__all__ = ["AwaitQuestionAnswer"]


class AwaitQuestionAnswer(Step[str]):
    """Waits for the question's resolution or deadline; raises a tool's question first."""

    def __init__(self, session: SessionDefinition) -> None:
        self._session = session

    def get_step_options(self) -> StepOptions | None:
        persistence = self._session.persistence
        return StepOptions(
            execute_durability=StepDurability.SYNC,
            wait_for_durability=StepDurability.SYNC,
            execute_lock_attributes=(persistence.pending_interrupts.lock(),),
            wait_for_load_attribute_maps=(persistence.agent_tool_calls,),
            execute_load_attribute_maps=(persistence.agent_tool_calls,),
        )

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return Wait.skip_immediately()
        is_ask_user = is_ask_user_call(record, self._session.options.built_in_tools)
        interrupt_id = question_interrupt_id(record, is_ask_user=is_ask_user)
        resolution = persistence.interrupt_resolutions.for_one(interrupt_id)
        seconds = question_wait_seconds(
            record,
            read_pending_interrupts(context, persistence),
            is_ask_user=is_ask_user,
            has_resolution=persistence.interrupt_resolutions.size(context, interrupt_id) > 0,
            now=datetime.now(UTC),
        )
        cancellation = cancellation_condition(persistence, input)
        if seconds is None:
            return Wait.any_of(resolution, cancellation)
        return Wait.any_of(Timer.by_duration(timedelta(seconds=seconds)), resolution, cancellation)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        record = read_record(context, persistence, input)
        if record is None or record.is_final:
            return dead_end()
        is_ask_user = is_ask_user_call(record, session.options.built_in_tools)
        interrupt_id = question_interrupt_id(record, is_ask_user=is_ask_user)
        resolutions = persistence.interrupt_resolutions.results(context, interrupt_id)
        now = datetime.now(UTC)
        cancelled = cancelled_wait(
            context, persistence, record, read_pending_interrupts(context, persistence)
        )
        if record.task_id is not None and is_turn_cancelled(context, persistence, record.turn_id):
            # cancel_turn abandons the task that asked; its question is already dropped.
            return go_to_many(cancel_task_movement(session, input))
        if resolutions:
            outcome = apply_question_resolution(record, resolutions[0], is_ask_user=is_ask_user)
        elif cancelled is not None:
            outcome = QuestionOutcome(cancelled)
        else:
            deadline = session.options.interrupt_deadline
            outcome = apply_question_timer(
                record,
                read_pending_interrupts(context, persistence),
                is_ask_user=is_ask_user,
                has_resolution=persistence.interrupt_resolutions.size(context, interrupt_id) > 0,
                turn_records=read_records(context, persistence),
                now=now,
                interrupt_deadline_at=now + deadline if deadline is not None else None,
            )
        commit_changes(context, persistence, outcome.changes, turn_id=record.turn_id)
        if outcome.next_step is ToolStepKind.POLL_TOOL_TASK:
            return go_to_many(poll_movement(session, record))
        if outcome.next_step is not None:
            return go_to_many(tool_step_movement(session, outcome.next_step, input))
        if outcome.wait_again:
            return go_to_many(question_movement(session, input))
        return dead_end()
