"""``CompactContext``: one ``summarize_context`` call that folds earlier messages into the
``ContextSummary``. The rules live in ``dex_agents._compaction``; this Step reads, calls
the runner once, and applies. A crash reruns only the summary call.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dex import AsyncContext, Step, StepDecision, StepOptions, go_to

from dex_agents._compaction import ContextSummaryRequest, SupportsCompaction, record_summary
from dex_agents._values import CompactContextInput
from dex_agents.session._control_reads import read_turn_control
from dex_agents.session._heartbeats import BackgroundHeartbeats
from dex_agents.session._routing import TurnRouting
from dex_agents.session._store import (
    read_context_summary,
    read_messages,
    read_state,
    read_usage,
    store_messages,
)
from dex_agents.session._tools import ContextCancellation
from dex_agents.session._tracing_hooks import model_call_span, read_trace_context
from dex_agents.session._turn import (
    MODEL_METHOD_TIMEOUT,
    AwaitUserMessage,
    SessionStep,
    go_to_run_model,
    model_step_options,
    route,
)

__all__ = ["CompactContext"]


class CompactContext(SessionStep, Step[CompactContextInput]):
    """Summarizes the messages after the current summary through ``through_sequence``."""

    def get_step_options(self) -> StepOptions | None:
        # RunModel's timeouts, retries and failure route; a movement names the chunks.
        return model_step_options(self._session, None)

    async def execute(self, context: AsyncContext, input: CompactContextInput) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        session = self._session
        persistence = session.persistence
        runner = session.runner
        state = read_state(context, persistence)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        if not isinstance(runner, SupportsCompaction):
            raise TypeError("CompactContext needs a runner with summarize_context")
        previous = read_context_summary(context, persistence)
        after = previous.last_sequence if previous is not None else 0
        if input.through_sequence <= after:
            return go_to_run_model(session, context)  # summarized already
        turn_id = state.active_turn_id
        if read_turn_control(context, persistence, turn_id).reason is not None:
            # Steered or cancelled at a safe boundary: end the turn without summarizing.
            return route(session, TurnRouting(apply_turn_control=True), context)
        messages = [
            message
            for message in read_messages(context, persistence, after_sequence=after)
            if message.sequence <= input.through_sequence
        ]
        events = self._writer(context, turn_id)
        try:
            events.write_event("compaction_started", {"through_sequence": input.through_sequence})
            parent = read_trace_context(context, session)
            span = model_call_span(context, session, turn_id, messages, parent, "CompactContext")
            async with span, BackgroundHeartbeats(context) as heartbeats:
                await heartbeats.beat()
                policy = session.options.compaction
                request = ContextSummaryRequest(
                    flow_id=context.flow_id,
                    turn_id=turn_id,
                    attempt=context.attempt,
                    messages=tuple(messages),
                    previous_summary=previous,
                    through_sequence=input.through_sequence,
                    input_token_budget=policy.context_window_tokens if policy else 0,
                    session_settings=self._session_settings(context, turn_id),
                    events=events,
                    cancellation=ContextCancellation(context),
                    deadline=datetime.now(UTC) + MODEL_METHOD_TIMEOUT,
                    step_execution_id=context.step_execution_id,
                    heartbeat=heartbeats.beat,
                )
                result = await runner.summarize_context(request)
                span.outcome = result
            summary, new_state, usage, finished = record_summary(
                state,
                previous,
                result,
                through_sequence=input.through_sequence,
                session_usage=read_usage(context, persistence),
            )
            persistence.context_summary.set(context, summary)
            persistence.agent_state.set(context, new_state)
            persistence.agent_usage.set(context, usage)
            # Retention may now delete chunks the new summary covers.
            store_messages(context, persistence, [], message_count=new_state.message_count)
            for event_type, payload in finished:
                events.write_event(event_type, payload)
        finally:
            events.close()
        return go_to_run_model(session, context)
