"""The engine state: every Flow of one database, its transactions and its queues.

Every entry point (a request, a Worker frame, a timer) runs synchronously to the end
of its transition inside one SQLite transaction (``EngineState.tx``), so a handler
result commits together with all its effects and the movements it causes.

The transitions are the modules above this one. They call only downwards; what they
need from a layer above is queued here instead and drained before the commit:

* commands for the Workers layer (``work.WorkerCommand``: submit, cancel or abandon a
  task), run by the attached ``WorkerPort`` when a transition block ends, in order;
* Flows due to continue as new, drained by ``drain()`` (the ``Engine``) at commit;
* synced Attribute writes for the Attribute Stores, projected once the commit is done.

Timers and Worker reports start new transitions from above: the state declares them
as the abstract ``on_*`` methods, and ``engine.Engine`` implements them. Long-polls
wake once the commit is done.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Generator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.work import Task, WorkerAction, WorkerCommand, WorkerPort
from dex_local_engine._rules import errors
from dex_local_engine._rules.decisions import continue_as_new_due
from dex_local_engine._rules.model import Flow, StepExec
from dex_local_engine._rules.values import stamp
from dex_local_engine._store.attribute_tables import AttributeTable
from dex_local_engine._store.store import Store
from dex_local_engine._store.streams import StreamStore

_LOG = logging.getLogger("dex_local_engine")


@dataclass(eq=False)
class Attempt:
    """One Step method attempt handed to the Workers, with its timers."""

    flow: Flow
    step: StepExec
    task: Task
    method_timer: asyncio.TimerHandle | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None

    def cancel_timers(self) -> None:
        """Stop the method and heartbeat timeout timers."""
        if self.method_timer is not None:
            self.method_timer.cancel()
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()


class EngineState(ABC):
    """All Flows of one database. Every method runs on the engine's event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.streams = StreamStore(store)
        self.workers: WorkerPort | None = None  # attached by the Workers layer
        self.flows: dict[str, Flow] = {}
        self.locks: dict[str, dict[str, str]] = {}  # flow ID -> Attribute key -> holder
        self.attempts: dict[tuple[str, str], Attempt] = {}  # (flow ID, sid)
        self.wakes: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self.flow_timers: dict[str, asyncio.TimerHandle] = {}
        self.indexes: dict[str, pb.IndexConfig] = {}  # Attribute key -> its search index
        self.attribute_tables: dict[str, AttributeTable] = {}  # Attribute Store name -> table
        # (store, Flow ID) -> Attribute -> its latest synced value, projected after commit
        self._projections: dict[tuple[str, str], dict[str, pb.Value]] = {}
        self.continue_due: dict[str, Flow] = {}  # Flows to continue as new at commit
        self._outbox: deque[WorkerCommand] = deque()
        self._running_commands = False
        self._changed: dict[str, asyncio.Event] = {}
        self._dirty_flows: dict[str, Flow] = {}
        self._dirty_steps: dict[tuple[str, str], StepExec] = {}
        self._notify: set[str] = set()
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
        """One transition: commit the store and wake long-polls when the outermost ends.

        Each block, nested or not, runs the Worker commands queued in it when it ends;
        the outermost then drains the wake-ups due at commit, writes the changed rows
        and commits.
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                self._run_commands()
            return
        self._depth = 1
        try:
            with self.store.transaction():
                try:
                    yield
                finally:
                    self._run_commands()
                self.drain()
                self._flush()
        except BaseException:
            self._projections.clear()  # rolled back: nothing to project
            raise
        finally:
            self._depth = 0
            self.continue_due.clear()
            self._dirty_flows.clear()
            self._dirty_steps.clear()
        # Committed: the Attribute Stores get the synced writes, then long-polls wake.
        projections, self._projections = self._projections, {}
        for (store, flow_id), writes in projections.items():
            self.attribute_tables[store].upsert(flow_id, writes)
        notify, self._notify = self._notify, set()
        for flow_id in notify:
            event = self._changed.pop(flow_id, None)
            if event is not None:
                event.set()

    @abstractmethod
    def drain(self) -> None:
        """Apply the wake-ups queued for the commit (Flows due to continue as new)."""

    def command(self, action: WorkerAction, task: Task) -> None:
        """Queue a command for the Workers layer; it runs when the current transition
        block ends (at once outside a transition)."""
        self._outbox.append(WorkerCommand(action, task))
        if not self._depth:
            self._run_commands()

    def _run_commands(self) -> None:
        # A command may start a nested transition (a Worker took the task); the running
        # loop goes on with the commands that one queues, so their order stays.
        if self._running_commands or self.workers is None:
            return
        self._running_commands = True
        try:
            while self._outbox:
                self.workers.apply(self._outbox.popleft())
        finally:
            self._running_commands = False

    def _flush(self) -> None:
        for flow in self._dirty_flows.values():
            self.store.put_flow(
                flow.flow_id, flow.run_id, flow.flow_type, flow.status, flow.meta_json()
            )
        for (flow_id, sid), step in self._dirty_steps.items():
            self.store.put_step(flow_id, sid, step.to_json())

    def project(self, store: str, flow: Flow, key: str, value: pb.Value) -> None:
        """Queue a synced Attribute write for an Attribute Store, projected after commit."""
        if store in self.attribute_tables:
            self._projections.setdefault((store, flow.flow_id), {})[key] = value

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
        """Append an event to the Flow's history, numbered and stamped now; a run that
        reaches its continue-as-new threshold is queued to continue at commit."""
        event.event_id = flow.next_event_id
        flow.next_event_id += 1
        event.event_time.CopyFrom(stamp(self.now(flow)))
        self.store.add_event(flow.flow_id, event.event_id, event.SerializeToString())
        self._notify.add(flow.flow_id)
        if flow.running and continue_as_new_due(
            flow.config.continue_as_new_threshold, events_after_start=flow.next_event_id - 2
        ):
            self.continue_due[flow.flow_id] = flow

    async def wait_change(self, flow_id: str, seconds: float) -> None:
        """Wait until the Flow changes or the given seconds pass."""
        event = self._changed.get(flow_id)
        if event is None:
            event = self._changed[flow_id] = asyncio.Event()
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for wraps the wait in a Task.
        with suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

    def flow(self, flow_id: str, *, active: bool) -> Flow:
        """The Flow with this ID (a running one when ``active``), or the not-found error."""
        flow = self.flows.get(flow_id)
        if flow is None or (active and not flow.running):
            raise errors.flow_not_found(flow_id, active=active)
        return flow

    # Transitions entered from above (timers and Worker reports) ----------------------

    @abstractmethod
    def on_step_due(self, flow: Flow, step: StepExec) -> None:
        """A Step's Timer, retry backoff or start delay came due."""

    @abstractmethod
    def on_attempt_assigned(self, task: Task) -> None:
        """A Worker took a Step method attempt's task."""

    @abstractmethod
    def on_attempt_frame(self, task: Task, frame: pb.PollWorkerTaskFrame) -> None:
        """A Worker sent a frame (heartbeat, Stream write, result, error) for an attempt."""

    @abstractmethod
    def on_attempt_lost(self, task: Task, started: bool, detail: str) -> None:
        """An attempt's task cannot finish: its Worker went away, or it cannot be sent."""

    @abstractmethod
    def on_method_timeout(self, attempt: Attempt, seconds: int) -> None:
        """An attempt ran past its method timeout."""


def load_closed_attributes(engine: EngineState, flow: Flow) -> None:
    """Load a closed Flow's Attributes from the store (a restart loads only running ones)."""
    if flow.running or flow.attributes:
        return
    for key, value in engine.store.attributes(flow.flow_id):
        parsed = pb.Value()
        parsed.ParseFromString(value)
        flow.attributes[key] = parsed


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
