"""The engine: the state of every Flow of one database, with its transitions.

``Engine`` is the machine's top. It completes ``state.EngineState`` with what only the
top can do: it drains the wake-ups queued for the commit (Flows due to continue as
new), it implements the transitions that timers and Workers start (``on_*``), and it
offers the entry points the gRPC services call. The transitions themselves live in
the modules below, one concept each, and call only downwards.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import (
    continue_as_new,
    flows,
    queries,
    recovery,
    resets,
    search,
    state_access,
    tasks,
    wakeups,
)
from dex_local_engine._machine.state import Attempt, EngineState
from dex_local_engine._machine.work import Task
from dex_local_engine._rules.model import Flow, StepExec, flow_result


class Engine(EngineState):
    """All Flows of one database. Every method runs on the engine's event loop."""

    # Wake-ups due at commit --------------------------------------------------------

    def drain(self) -> None:
        """Continue as new the Flows whose run reached its threshold in this transition."""
        while self.continue_due:
            _, flow = self.continue_due.popitem()
            continue_as_new.continue_flow(self, flow)

    # Transitions started by timers and Workers ---------------------------------------

    def on_step_due(self, flow: Flow, step: StepExec) -> None:
        """A Step's Timer, retry backoff or start delay came due."""
        wakeups.step_due(self, flow, step)

    def on_attempt_assigned(self, task: Task) -> None:
        """A Worker took a Step method attempt's task."""
        tasks.on_assigned(self, task)

    def on_attempt_frame(self, task: Task, frame: pb.PollWorkerTaskFrame) -> None:
        """A Worker sent a frame for a Step method attempt."""
        tasks.on_frame(self, task, frame)

    def on_attempt_lost(self, task: Task, started: bool, detail: str) -> None:
        """A Step method attempt's task cannot finish."""
        tasks.on_lost(self, task, started, detail)

    def on_method_timeout(self, attempt: Attempt, seconds: int) -> None:
        """A Step method attempt ran past its method timeout."""
        tasks.on_method_timeout(self, attempt, seconds)

    # Entry points ------------------------------------------------------------------

    def recover(self) -> None:
        """Load every Flow and resume the running ones after a restart."""
        recovery.recover(self)

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """StartFlow: the new (or, for a repeated request, the existing) run ID."""
        return flows.start_flow(self, request)

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """StopFlow: cancel, terminate or fail a running Flow."""
        flows.stop_flow(self, request)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """SkipTimer: fire a waiting Step's Timer now (or as soon as it waits)."""
        wakeups.skip_timer(self, request)

    def publish(self, request: pb.PublishToChannelRequest) -> None:
        """PublishToChannel from outside the Flow."""
        state_access.publish(self, request)

    def set_attributes(self, request: pb.SetAttributesRequest) -> None:
        """SetAttributes from outside the Flow."""
        state_access.set_attributes(self, request)

    def get_attributes(self, request: pb.GetAttributesRequest) -> pb.GetAttributesResponse:
        """GetAttributes of a running or closed Flow."""
        return state_access.get_attributes(self, request)

    def reset_flow(self, request: pb.ResetFlowRequest) -> pb.ResetFlowResponse:
        """ResetFlow: a new run from a point of the old run's history (time travel)."""
        return resets.reset_flow(self, request)

    def trigger_continue_as_new(self, request: pb.TriggerContinueAsNewRequest) -> None:
        """TriggerContinueAsNew: move a running Flow to a new run now."""
        continue_as_new.trigger(self, request)

    def sync_indexes(self, request: pb.SyncAttributeIndexRequest) -> None:
        """SyncAttributeIndexes: remember which Attributes are searchable, and how."""
        search.sync_indexes(self, request)

    def search_flows(self, request: pb.SearchFlowsRequest) -> pb.SearchFlowsResponse:
        """SearchFlows: one page of the Flows a query matches."""
        return search.search_flows(self, request)

    def flow_result(self, flow: Flow) -> pb.FlowResult:
        """The result WaitForFlow returns for a closed Flow."""
        return flow_result(flow)

    def summary(self, flow: Flow) -> pb.GetFlowSummaryResponse:
        """GetFlowSummary."""
        return queries.summary(flow)

    def flow_state(self, flow: Flow) -> pb.GetFlowStateResponse:
        """GetFlowState (partial)."""
        return queries.flow_state(self, flow)

    def history(
        self, flow: Flow, start_event_id: int, page_size: int
    ) -> pb.GetHistoryEventsResponse:
        """One page of GetHistoryEvents."""
        return queries.history(self, flow, start_event_id, page_size)

    async def close(self) -> None:
        """Stop every timer; running attempts resume after a restart."""
        self.closing = True
        for attempt in list(self.attempts.values()):
            attempt.cancel_timers()
        for handle in list(self.wakes.values()) + list(self.flow_timers.values()):
            handle.cancel()
