"""The engine core: the state of every Flow of one database and its transactions.

Every entry point (a request, a Worker frame, a timer) runs synchronously to the end
of its transition inside one SQLite transaction, so a handler result commits together
with all its effects and the movements it causes. Tasks handed to Workers go out only
after the synchronous part returns, which is after the commit.

The transitions live in modules of one concept each (``flows``, ``steps``, ``locks``,
``waits``, ``tasks``, ``outcomes``, ``effects``, ``worker_requests``, ``rpcs``,
``state_access``, ``queries``, ``recovery``); they are functions over this core, which
holds the state, owns the transaction boundary and offers the entry points the gRPC
services call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Generator
from contextlib import contextmanager, suppress

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import (
    continue_as_new,
    errors,
    flows,
    queries,
    recovery,
    resets,
    rpcs,
    search,
    state_access,
    waits,
)
from dex_local_engine.constants import LONG_POLL_CAP_SECONDS as LONG_POLL_CAP_SECONDS
from dex_local_engine.constants import WAIT_FOR_FLOW_CAP_SECONDS as WAIT_FOR_FLOW_CAP_SECONDS
from dex_local_engine.dispatch import Dispatcher
from dex_local_engine.model import Flow, StepExec
from dex_local_engine.store import Store
from dex_local_engine.streams import StreamStore
from dex_local_engine.tasks import Attempt
from dex_local_engine.values import stamp

_LOG = logging.getLogger("dex_local_engine")


class Engine:
    """All Flows of one database. Every method runs on the engine's event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.streams = StreamStore(store)
        self.dispatch = Dispatcher()
        self.dispatch.frame_batch = self.tx
        self.flows: dict[str, Flow] = {}
        self.locks: dict[str, dict[str, str]] = {}  # flow ID -> Attribute key -> holder
        self.attempts: dict[tuple[str, str], Attempt] = {}  # (flow ID, sid)
        self.wakes: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self.flow_timers: dict[str, asyncio.TimerHandle] = {}
        self.indexes: dict[str, pb.IndexConfig] = {}  # Attribute key -> its search index
        self._changed: dict[str, asyncio.Event] = {}
        self._dirty_flows: dict[str, Flow] = {}
        self._dirty_steps: dict[tuple[str, str], StepExec] = {}
        self._notify: set[str] = set()
        self._continue_due: dict[str, Flow] = {}  # Flows to continue as new at commit
        self._depth = 0
        self.closing = False
        # While a reset replays a Flow's history: the Flows whose methods must not
        # reach Workers yet, and their clocks at the replayed event (see ``replay``).
        self.replaying: set[str] = set()
        self.replay_clocks: dict[str, float] = {}
        # Dex raises explicit heartbeat timeouts to a server minimum of ten seconds.
        self.min_heartbeat_timeout = _min_heartbeat_timeout()

    # Transactions ------------------------------------------------------------------

    @contextmanager
    def tx(self) -> Generator[None]:
        """One transition: commit the store and wake long-polls when the outermost ends."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            with self.store.transaction():
                yield
                while self._continue_due:
                    _, flow = self._continue_due.popitem()
                    continue_as_new.continue_flow(self, flow)
                self._flush()
        finally:
            self._depth = 0
            self._continue_due.clear()
            self._dirty_flows.clear()
            self._dirty_steps.clear()
        notify, self._notify = self._notify, set()
        for flow_id in notify:
            event = self._changed.pop(flow_id, None)
            if event is not None:
                event.set()

    def _flush(self) -> None:
        for flow in self._dirty_flows.values():
            self.store.put_flow(
                flow.flow_id, flow.run_id, flow.flow_type, flow.status, flow.meta_json()
            )
        for (flow_id, sid), step in self._dirty_steps.items():
            self.store.put_step(flow_id, sid, step.to_json())

    def touch(self, flow: Flow, step: StepExec | None = None) -> None:
        """Mark a Step's row (or, without a Step, the Flow's row) for writing at commit.

        The Flow row holds status, outputs, graceful and stale skips; counters and
        sequence numbers are derived from the Step, message and history rows on load,
        so a Step transition does not rewrite it.
        """
        if step is None:
            self._dirty_flows[flow.flow_id] = flow
        else:
            self._dirty_steps[(flow.flow_id, step.sid)] = step
        self._notify.add(flow.flow_id)

    def mark_changed(self, flow_id: str) -> None:
        """Wake the Flow's long-polls once the current transaction commits."""
        self._notify.add(flow_id)

    def now(self, flow: Flow) -> float:
        """The Flow's clock: the wall clock, or the replayed event's time during a reset."""
        return self.replay_clocks.get(flow.flow_id) or time.time()

    def record(self, flow: Flow, event: pb.FlowHistoryEvent) -> None:
        """Append an event to the Flow's history, numbered and stamped now."""
        event.event_id = flow.next_event_id
        flow.next_event_id += 1
        event.event_time.CopyFrom(stamp(self.now(flow)))
        self.store.add_event(flow.flow_id, event.event_id, event.SerializeToString())
        self._notify.add(flow.flow_id)
        if continue_as_new.threshold_reached(flow):
            self._continue_due[flow.flow_id] = flow

    async def wait_change(self, flow_id: str, seconds: float) -> None:
        """Wait until the Flow changes or the given seconds pass."""
        event = self._changed.get(flow_id)
        if event is None:
            event = self._changed[flow_id] = asyncio.Event()
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for wraps the wait in a Task.
        with suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

    # Entry points ------------------------------------------------------------------

    def recover(self) -> None:
        """Load every Flow and resume the running ones after a restart."""
        recovery.recover(self)

    def flow(self, flow_id: str, *, active: bool) -> Flow:
        """The Flow with this ID (a running one when ``active``), or the not-found error."""
        flow = self.flows.get(flow_id)
        if flow is None or (active and not flow.running):
            raise errors.flow_not_found(flow_id, active=active)
        return flow

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """StartFlow: the new (or, for a repeated request, the existing) run ID."""
        return flows.start_flow(self, request)

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """StopFlow: cancel, terminate or fail a running Flow."""
        flows.stop_flow(self, request)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """SkipTimer: fire a waiting Step's Timer now (or as soon as it waits)."""
        waits.skip_timer(self, request)

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        """InvokeRPC: run an RPC handler on a Worker and apply its result."""
        return await rpcs.invoke_rpc(self, request)

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
        return flows.flow_result(flow)

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
        """Stop every timer and the dispatcher; running attempts resume after a restart."""
        self.closing = True
        for attempt in list(self.attempts.values()):
            attempt.cancel_timers()
        for handle in list(self.wakes.values()) + list(self.flow_timers.values()):
            handle.cancel()
        await self.dispatch.close()


def _min_heartbeat_timeout() -> float:
    """The heartbeat timeout floor, ``DEX_LOCAL_ENGINE_MIN_HEARTBEAT_TIMEOUT`` or 10 s."""
    text = os.environ.get("DEX_LOCAL_ENGINE_MIN_HEARTBEAT_TIMEOUT", "")
    if not text:
        return 10.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        _LOG.warning("ignoring DEX_LOCAL_ENGINE_MIN_HEARTBEAT_TIMEOUT=%r: not seconds >= 0", text)
        return 10.0
    return value
