"""``ApplyTurnControl``: ends a steered or cancelled turn and starts the steered one.

The rules live in ``turn_control_rules``; this Step reads, asks the runner for the
turn's unfinished messages (or builds the note), and applies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepOptions,
    Wait,
    dead_end,
    go_to,
)

from dex_agents._contract import SupportsUnfinishedTurnMessages
from dex_agents._plans import interaction_mode_for_turn
from dex_agents._texts import build_turn_control_note
from dex_agents._values import (
    AgentMessage,
    AgentState,
    AgentToolCall,
    AgentUserMessage,
    FrameworkMessage,
)
from dex_agents.session._control_reads import read_plan, read_turn_control
from dex_agents.session._moves import apply_turn_control_options
from dex_agents.session._store import (
    commit_changes,
    read_context_summary,
    read_messages,
    read_pending_interrupts,
    read_records,
    read_reply_sequence,
    read_state,
)
from dex_agents.session._turn import (
    AwaitUserMessage,
    SessionStep,
    go_to_run_model,
    model_input_start,
)
from dex_agents.session._turn_control_rules import (
    TurnControl,
    end_controlled_turn,
    start_turn_with_messages,
)

__all__ = [
    "MAX_STEERED_MESSAGES",
    "ApplyTurnControl",
]

_log = logging.getLogger(__name__)

MAX_STEERED_MESSAGES = 1000
"""At most this many steered messages (and stale wakes) are consumed at once."""


class ApplyTurnControl(SessionStep, Step[None]):
    """Consumes every steered message and stale wake, ends a steered or cancelled turn,
    then starts a turn with the steered messages."""

    def get_step_options(self) -> StepOptions | None:
        # A movement without options (such as from an older Worker) loads every chunk.
        return apply_turn_control_options(self._session, None)

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        persistence = self._session.persistence
        # No lower bound: take whatever is queued now, without waiting.
        return Wait.all_of(
            persistence.steered_user_messages.at_most(MAX_STEERED_MESSAGES),
            persistence.turn_control_requests.at_most(MAX_STEERED_MESSAGES),
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        steered = list(persistence.steered_user_messages.results(context))
        state = read_state(context, persistence) or AgentState()
        turn_id = state.active_turn_id
        if turn_id is not None:
            control = read_turn_control(context, persistence, turn_id)
            if steered and not control.cancelled:
                control = TurnControl(steered=True)
            if control.reason is None:
                # Another path owns this turn (it was never steered or cancelled).
                return dead_end()
            records = read_records(context, persistence)
            # The unfinished turn as RunModel reads it: the window and the chunks after the
            # summary, so a turn longer than the window reaches the runner whole.
            summary = read_context_summary(context, persistence)
            messages = read_messages(
                context, persistence, after_sequence=model_input_start(session, summary)
            )
            changes = end_controlled_turn(
                state,
                control,
                steered_message_count=len(steered),
                records=records,
                pending_interrupts=read_pending_interrupts(context, persistence),
                reply_sequence=read_reply_sequence(context, persistence),
                stored_messages=messages,
                closing_messages=self._closing_messages(context, state, records, messages, control),
            )
            commit_changes(context, persistence, changes, turn_id=turn_id)
            assert changes.state is not None
            state = changes.state
        if not steered:
            return go_to(AwaitUserMessage, None)
        return self._start_steered_turn(context, state, steered)

    def _start_steered_turn(
        self, context: AsyncContext, state: AgentState, steered: Sequence[AgentUserMessage]
    ) -> StepDecision:
        persistence = self._session.persistence
        build = self._session.runner.build_user_message
        mode = interaction_mode_for_turn(
            any(message.plan_mode for message in steered), read_plan(context, persistence)
        )
        user_messages = [build(message.text) for message in steered]
        changes, turn_id = start_turn_with_messages(state, user_messages, mode)
        commit_changes(context, persistence, changes, turn_id=turn_id)
        self._began_turn(context, turn_id)
        return go_to_run_model(self._session, context)

    def _closing_messages(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        messages: Sequence[AgentMessage],
        control: TurnControl,
    ) -> tuple[FrameworkMessage, ...]:
        """The runner's unfinished-turn messages, or else the note listing the calls that ran."""
        session = self._session
        runner = session.runner
        assert state.active_turn_id is not None
        if isinstance(runner, SupportsUnfinishedTurnMessages):
            writer = self._writer(context, state.active_turn_id)
            try:
                turn = self._turn_context(
                    context,
                    state.active_turn_id,
                    messages=messages,
                    records=records,
                    events=writer,
                    heartbeat=context.heartbeat,
                    interaction_mode=state.interaction_mode,
                    plan=read_plan(context, session.persistence),
                )
                produced = tuple(runner.build_unfinished_turn_messages(turn))
                if all(isinstance(message, FrameworkMessage) for message in produced):  # pyright: ignore[reportUnnecessaryIsInstance]
                    return produced
                _log.error("build_unfinished_turn_messages returned a value that is not a message")
            except Exception:
                _log.exception("build_unfinished_turn_messages failed; storing the note instead")
            finally:
                writer.close()
        note = build_turn_control_note(cancelled=control.cancelled, records=records)
        if note is None:
            return ()
        try:
            message = runner.build_user_message(note)
        except Exception:
            _log.exception("build_user_message failed for the turn control note")
            return ()
        return (message,) if isinstance(message, FrameworkMessage) else ()  # pyright: ignore[reportUnnecessaryIsInstance]
