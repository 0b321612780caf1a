"""The engine: Flow and Step execution state transitions, owned by one event loop.

Every entry point (a request, a Worker frame, a timer) runs synchronously to the end
of its transition inside one SQLite transaction, so a handler result commits together
with all its effects and the movements it causes. Tasks handed to Workers go out only
after the synchronous part returns, which is after the commit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
import uuid
from collections import deque
from collections.abc import Generator, Iterable
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import cast

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf import struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from dex_local_engine import errors
from dex_local_engine.attempt_progress import StepAttemptProgress, with_attempt_progress
from dex_local_engine.conditions import WaitState, evaluate_wait, validate_waiting_condition
from dex_local_engine.decisions import FlowEffect, graceful_completion_due, plan_close
from dex_local_engine.dispatch import Dispatcher, Task
from dex_local_engine.errors import DexError
from dex_local_engine.limits import VALUE_TOO_LARGE_ERROR_TYPE
from dex_local_engine.model import (
    METHOD_PHASES,
    ChannelMsg,
    Flow,
    MethodState,
    Phase,
    StaleSkip,
    StepExec,
)
from dex_local_engine.retry import effective_retry_policy, next_retry_delay
from dex_local_engine.store import Store
from dex_local_engine.streams import StreamStore

_LOG = logging.getLogger("dex_local_engine")

DEFAULT_METHOD_TIMEOUT_SECONDS = 2 * 60 * 60
DEFAULT_RPC_TIMEOUT_SECONDS = 30
LONG_POLL_CAP_SECONDS = 30.0
WAIT_FOR_FLOW_CAP_SECONDS = 60.0
RPC_FROM_PREFIX = "__rpc/"
TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"  # the SDK routes it to Flow.handle_timeout


def uuid7() -> str:
    """A time-ordered UUID (version 7)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + secrets.token_bytes(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def _stamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _is_null(value: pb.Value | None) -> bool:
    return value is None or value.WhichOneof("kind") in (None, "null_value")


def recovery_error_info(detail: str, error_type: str, *, started: bool) -> pb.RecoveryErrorInfo:
    progress = StepAttemptProgress.NOT_COMPLETED if started else StepAttemptProgress.NOT_STARTED
    return with_attempt_progress(
        pb.RecoveryErrorInfo(detail=detail, error_type=error_type), progress
    )


@dataclass(eq=False)
class _Attempt:
    """Timers of one Step method attempt handed to the dispatcher."""

    flow: Flow
    step: StepExec
    task: Task
    method_timer: asyncio.TimerHandle | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None

    def cancel_timers(self) -> None:
        if self.method_timer is not None:
            self.method_timer.cancel()
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()


class Engine:
    """All Flows of one database. Every method runs on the engine's event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.streams = StreamStore(store)
        self.dispatch = Dispatcher()
        self.flows: dict[str, Flow] = {}
        self._locks: dict[str, dict[str, str]] = {}  # flow ID -> Attribute key -> holder
        self._attempts: dict[tuple[str, str], _Attempt] = {}  # (flow ID, sid)
        self._wakes: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._flow_timers: dict[str, asyncio.TimerHandle] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._dirty_flows: dict[str, Flow] = {}
        self._dirty_steps: dict[tuple[str, str], StepExec] = {}
        self._notify: set[str] = set()
        self._depth = 0
        self.closing = False
        # Dex raises explicit heartbeat timeouts to a server minimum of ten seconds.
        self.min_heartbeat_timeout = _min_heartbeat_timeout()

    # Transactions ------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Generator[None]:
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
                self._flush()
        finally:
            self._depth = 0
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

    def _touch(self, flow: Flow, step: StepExec | None = None) -> None:
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

    async def wait_change(self, flow_id: str, seconds: float) -> None:
        """Wait until the Flow changes or the given seconds pass."""
        event = self._changed.get(flow_id)
        if event is None:
            event = self._changed[flow_id] = asyncio.Event()
        with suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    # Start-up ---------------------------------------------------------------------

    def recover(self) -> None:
        """Load every Flow and resume the running ones after a restart."""
        self.streams.load()
        for row in self.store.flows():
            flow = Flow.from_row(row.flow_id, row.run_id, row.flow_type, row.status, row.meta)
            self.flows[flow.flow_id] = flow
            flow.next_event_id = max(flow.next_event_id, self.store.last_event_id(flow.flow_id) + 1)
            for data in self.store.steps(flow.flow_id):
                step = StepExec.from_json(data)
                flow.counters[step.step_type] = max(
                    flow.counters.get(step.step_type, 0), step.number
                )
                flow.next_order = max(flow.next_order, step.order + 1)
                if step.ended:
                    flow.ended_steps[step.sid] = step.phase
                elif flow.running:
                    flow.steps[step.sid] = step
            if not flow.running:
                continue
            for key, value in self.store.attributes(flow.flow_id):
                parsed = pb.Value()
                parsed.ParseFromString(value)
                flow.attributes[key] = parsed
            for seq, channel, message_id, value, consumer in self.store.messages(flow.flow_id):
                parsed = pb.Value()
                parsed.ParseFromString(value)
                message = ChannelMsg(seq, channel, message_id, parsed)
                flow.next_seq = max(flow.next_seq, seq + 1)
                if consumer is None:
                    flow.channels.setdefault(channel, deque()).append(message)
                else:
                    flow.inflight.setdefault(consumer, []).append(message)
        running = [flow for flow in self.flows.values() if flow.running]
        with self._tx():
            for flow in running:
                locks = self._locks.setdefault(flow.flow_id, {})
                for step in self._ordered_steps(flow):
                    if step.phase is Phase.WAIT_FOR:
                        for key in step.options.wait_for_lock_attribute_keys:
                            locks[key] = step.sid
                    elif step.phase is Phase.EXECUTE:
                        for key in step.options.execute_lock_attribute_keys:
                            locks[key] = step.sid
            for flow in running:
                self._arm_flow_timeout(flow)
                for step in self._ordered_steps(flow):
                    if step.phase in METHOD_PHASES and step.method.running:
                        error = pb.WorkerErrorResponse(
                            detail="the engine stopped while this attempt was running",
                            error_type="dex_local_engine.EngineRestarted",
                            grpc_status=grpc.StatusCode.UNAVAILABLE.value[0],
                        )
                        self._attempt_failed(flow, step, error, started=True)
                for step in self._ordered_steps(flow):
                    self._advance(flow, step)
                self._check_graceful(flow)

    # Flows ------------------------------------------------------------------------

    def flow(self, flow_id: str, *, active: bool) -> Flow:
        flow = self.flows.get(flow_id)
        if flow is None or (active and not flow.running):
            raise errors.flow_not_found(flow_id, active=active)
        return flow

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        if not request.flow_id:
            raise errors.invalid("StartFlow needs a flow_id")
        if not request.flow_type:
            raise errors.invalid("StartFlow needs a flow_type")
        validate_step_options(request.step_options)
        options = request.flow_start_options
        existing = self.flows.get(request.flow_id)
        policy = options.id_reuse_policy or pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING
        with self._tx():
            if existing is not None:
                if existing.running:
                    if policy != pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                        return self._already_started_or_same(request, existing)
                    self._close_flow(
                        existing, pb.FLOW_STATUS_TERMINATED, 0, "terminated by a new start"
                    )
                elif policy == pb.ID_REUSE_POLICY_DISALLOW_REUSE or (
                    policy == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
                    and existing.status == pb.FLOW_STATUS_COMPLETED
                ):
                    return self._already_started_or_same(request, existing)
                self._forget(existing)
            config = pb.FlowConfig()
            if options.HasField("flow_config_override"):
                config.CopyFrom(options.flow_config_override)
            flow = Flow(
                flow_id=request.flow_id,
                run_id=uuid7(),
                flow_type=request.flow_type,
                request_id=request.request_id,
                start_time=time.time(),
                config=config,
                timeout_seconds=max(0, request.flow_timeout_seconds),
                timeout_policy=request.flow_timeout_policy,
            )
            self.flows[flow.flow_id] = flow
            self._locks[flow.flow_id] = {}
            self._touch(flow)
            writes = list(options.attributes)
            self._apply_attribute_writes(flow, writes)
            step_input = request.step_input if request.HasField("step_input") else _null()
            event = pb.FlowHistoryEvent(
                flow_started_or_continued=pb.FlowStartedOrContinuedHistoryEvent(
                    flow_execution_id=pb.FlowExecutionID(flow_id=flow.flow_id, run_id=flow.run_id),
                    flow_type=flow.flow_type,
                    flow_config=config,
                    initial_start=pb.FlowInitialStart(
                        start_step_type=request.start_step_type,
                        step_input=step_input,
                        step_options=request.step_options,
                        initial_attributes=[pb.KV(key=w.key, value=w.value) for w in writes],
                    ),
                )
            )
            self._record(flow, event)
            self._arm_flow_timeout(flow)
            if flow.timeout_seconds > 0 and flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
                self._start_timeout_handler(flow, options.timeout_handler_options)
            if request.start_step_type:  # a Flow may start without a Step and wait for RPCs
                movement = pb.StepMovement(
                    step_type=request.start_step_type,
                    step_input=step_input,
                    step_options=request.step_options,
                )
                delay = max(0, options.flow_start_delay_seconds)
                self._start_steps(flow, [movement], from_id="", not_before=flow.start_time + delay)
        return flow.run_id

    def _start_timeout_handler(self, flow: Flow, handler: pb.FlowTimeoutHandlerOptions) -> None:
        """The HANDLER timeout policy: a Step waiting on one Timer, then Flow.handle_timeout."""
        options = pb.StepOptions(
            skip_wait_for=True,
            execute_timeout_seconds=handler.method_timeout_seconds,
            heartbeat_timeout_seconds=handler.heartbeat_timeout_seconds,
            execute_failure_policy=handler.failure_policy,
            execute_failure_proceed_step_type=handler.failure_proceed_step_type,
            execute_durability_override=handler.durability_override,
            execute_lock_attribute_keys=handler.lock_attribute_keys,
            execute_load_attribute_map_instances=handler.load_attribute_map_instances,
            execute_load_channel_names=handler.load_channel_names,
            execute_load_channel_map_instances=handler.load_channel_map_instances,
        )
        if handler.HasField("retry_policy"):
            options.execute_retry_policy.CopyFrom(handler.retry_policy)
        if handler.HasField("failure_proceed_step_options"):
            options.execute_failure_proceed_step_options.CopyFrom(
                handler.failure_proceed_step_options
            )
        flow.counters[TIMEOUT_HANDLER_STEP_TYPE] = 1
        step = StepExec(
            sid=f"{TIMEOUT_HANDLER_STEP_TYPE}-1",
            step_type=TIMEOUT_HANDLER_STEP_TYPE,
            number=1,
            from_id="",
            step_input=_null(),
            options=options,
            recovery=None,
            order=flow.next_order,
            phase=Phase.WAITING,
            condition=pb.WaitingCondition(
                waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
                timer_conditions=[pb.TimerCondition(duration_seconds=flow.timeout_seconds)],
            ),
            wait_started=flow.start_time,
        )
        flow.next_order += 1
        flow.steps[step.sid] = step
        self._touch(flow, step)
        self._advance(flow, step)

    def _already_started_or_same(self, request: pb.StartFlowRequest, existing: Flow) -> str:
        """The reuse policy rejects the start: a retry of the same request that asked to
        ignore that gets the existing run, anything else the already-started error."""
        options = request.flow_start_options
        if (
            options.flow_already_started_options.ignore_already_started_error
            and request.request_id
            and request.request_id == existing.request_id
        ):
            return existing.run_id
        raise self._already_started(request.flow_id)

    def _already_started(self, flow_id: str) -> DexError:
        return DexError(
            grpc.StatusCode.ALREADY_EXISTS,
            pb.ERROR_SUB_STATUS_FLOW_ALREADY_STARTED,
            f"Flow {flow_id!r} was already started",
        )

    def _forget(self, flow: Flow) -> None:
        for step in list(flow.steps.values()):
            self._drop_runtime(flow, step)
        timer = self._flow_timers.pop(flow.flow_id, None)
        if timer is not None:
            timer.cancel()
        self.store.delete_flow_data(flow.flow_id)

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        flow = self.flow(request.flow_id, active=True)
        with self._tx():
            if request.stop_type == pb.STOP_TYPE_TERMINATE:
                self._close_flow(flow, pb.FLOW_STATUS_TERMINATED, 0, request.reason)
            elif request.stop_type == pb.STOP_TYPE_FAIL:
                self._close_flow(
                    flow,
                    pb.FLOW_STATUS_FAILED,
                    pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
                    request.reason,
                )
            else:
                self._close_flow(flow, pb.FLOW_STATUS_CANCELED, 0, request.reason)

    def _arm_flow_timeout(self, flow: Flow) -> None:
        if flow.timeout_seconds <= 0 or not flow.running:
            return
        if flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
            return  # the timeout handler Step waits on its own Timer
        delay = max(0.0, flow.start_time + flow.timeout_seconds - time.time())
        loop = asyncio.get_running_loop()
        self._flow_timers[flow.flow_id] = loop.call_later(delay, self._on_flow_timeout, flow)

    def _on_flow_timeout(self, flow: Flow) -> None:
        self._flow_timers.pop(flow.flow_id, None)
        if not flow.running or self.flows.get(flow.flow_id) is not flow:
            return
        with self._tx():
            if flow.timeout_policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
                self._close_flow(
                    flow,
                    pb.FLOW_STATUS_CANCELED,
                    0,
                    f"Flow timed out after {flow.timeout_seconds} seconds",
                )
            else:
                self._close_flow(
                    flow,
                    pb.FLOW_STATUS_FAILED,
                    pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT,
                    f"Flow timed out after {flow.timeout_seconds} seconds",
                )

    def _close_flow(self, flow: Flow, status: int, error_type: int, message: str) -> None:
        if not flow.running:
            return
        for step in self._ordered_steps(flow):
            self._drop_runtime(flow, step)
            for message_row in flow.inflight.pop(step.sid, []):
                self.store.delete_message(flow.flow_id, message_row.seq)
            self._end_step(flow, step, Phase.CANCELED)
        self._locks[flow.flow_id] = {}
        timer = self._flow_timers.pop(flow.flow_id, None)
        if timer is not None:
            timer.cancel()
        flow.status = status
        flow.close_time = time.time()
        flow.error_type = error_type
        flow.error_message = message if error_type else ""
        _LOG.info(
            "flow %s closed: %s %s",
            flow.flow_id,
            pb.FlowStatus.Name(cast(pb.FlowStatus, status)),
            message,
        )
        self._record(
            flow,
            pb.FlowHistoryEvent(
                flow_closed=pb.FlowClosedHistoryEvent(
                    flow_status=cast(pb.FlowStatus, status),
                    results=flow.outputs,
                    error_type=cast(pb.FlowErrorType, error_type),
                    error_message=flow.error_message,
                )
            ),
        )
        self._touch(flow)

    def flow_result(self, flow: Flow) -> pb.FlowResult:
        return pb.FlowResult(
            flow_status=cast(pb.FlowStatus, flow.status),
            results=flow.outputs,
            error_type=cast(pb.FlowErrorType, flow.error_type),
            error_message=flow.error_message,
        )

    def _record(self, flow: Flow, event: pb.FlowHistoryEvent) -> None:
        event.event_id = flow.next_event_id
        flow.next_event_id += 1
        event.event_time.CopyFrom(_stamp(time.time()))
        self.store.add_event(flow.flow_id, event.event_id, event.SerializeToString())
        self._notify.add(flow.flow_id)

    def _check_graceful(self, flow: Flow) -> None:
        if flow.running and graceful_completion_due(
            flow.graceful,
            ((s.step_type, s.phase is Phase.WAITING) for s in flow.steps.values()),
            TIMEOUT_HANDLER_STEP_TYPE,
        ):
            self._close_flow(flow, pb.FLOW_STATUS_COMPLETED, 0, "")

    # Steps ------------------------------------------------------------------------

    def _ordered_steps(self, flow: Flow) -> list[StepExec]:
        return sorted(flow.steps.values(), key=lambda s: s.order)

    def _start_steps(
        self,
        flow: Flow,
        movements: Iterable[pb.StepMovement],
        *,
        from_id: str,
        recovery: pb.RecoveryErrorInfo | None = None,
        not_before: float | None = None,
    ) -> None:
        created: list[StepExec] = []
        for movement in movements:
            if not movement.step_type:
                raise errors.invalid("a Step movement needs a step_type")
            number = flow.counters.get(movement.step_type, 0) + 1
            flow.counters[movement.step_type] = number
            step = StepExec(
                sid=f"{movement.step_type}-{number}",
                step_type=movement.step_type,
                number=number,
                from_id=from_id,
                step_input=movement.step_input if movement.HasField("step_input") else _null(),
                options=movement.step_options,
                recovery=recovery,
                order=flow.next_order,
            )
            flow.next_order += 1
            if not_before is not None and not_before > time.time():
                step.method.retry_at = not_before  # start delay, honored before any method
            flow.steps[step.sid] = step
            self._touch(flow, step)
            created.append(step)
        for step in created:
            self._advance(flow, step)

    def _advance(self, flow: Flow, step: StepExec) -> None:
        """Move a Step execution forward as far as it can go now."""
        while flow.running and not step.ended:
            if step.phase is Phase.WAIT_FOR_LOCK:
                delayed_until = step.method.retry_at
                if delayed_until is not None and delayed_until > time.time():
                    self._arm_wake(flow, step, delayed_until)
                    return
                if step.options.skip_wait_for:
                    step.results = pb.ConditionResults()
                    step.phase = Phase.EXECUTE_LOCK
                elif self._acquire(flow, step.sid, step.options.wait_for_lock_attribute_keys):
                    step.phase = Phase.WAIT_FOR
                    step.method = MethodState(first_attempt_at=time.time())
                else:
                    return
                self._touch(flow, step)
            elif step.phase is Phase.EXECUTE_LOCK:
                if not self._acquire(flow, step.sid, step.options.execute_lock_attribute_keys):
                    return
                step.phase = Phase.EXECUTE
                step.method = MethodState(first_attempt_at=time.time())
                self._touch(flow, step)
            elif step.phase is Phase.WAITING:
                if not self._evaluate(flow, step):
                    return
            else:  # a method phase
                key = (flow.flow_id, step.sid)
                if key in self._attempts:
                    return
                retry_at = step.method.retry_at
                if retry_at is not None:
                    if retry_at > time.time():
                        self._arm_wake(flow, step, retry_at)
                        return
                    step.method.retry_at = None
                    self._touch(flow, step)
                self._dispatch_attempt(flow, step)
                return

    def _end_step(self, flow: Flow, step: StepExec, phase: Phase) -> None:
        step.phase = phase
        flow.steps.pop(step.sid, None)
        flow.ended_steps[step.sid] = phase
        self._touch(flow, step)

    def _drop_runtime(self, flow: Flow, step: StepExec) -> None:
        """Stop every timer and task of a Step execution and free its locks.

        As in Dex, a running method hears about the cancellation only when the Step has a
        heartbeat timeout or the method has ASYNC durability; otherwise it runs to its end
        and its result is dropped.
        """
        attempt = self._attempts.pop((flow.flow_id, step.sid), None)
        if attempt is not None:
            attempt.cancel_timers()
            durability = (
                step.options.wait_for_durability_override
                if step.phase is Phase.WAIT_FOR
                else step.options.execute_durability_override
            )
            if step.options.heartbeat_timeout_seconds > 0 or durability == pb.STEP_DURABILITY_ASYNC:
                self.dispatch.cancel(attempt.task)
            else:
                self.dispatch.abandon(attempt.task)
        wake = self._wakes.pop((flow.flow_id, step.sid), None)
        if wake is not None:
            wake.cancel()
        self._release(flow, step.sid)

    def _cancel_steps(self, flow: Flow, step_types: Iterable[str], from_id: str | None) -> None:
        types = set(step_types)
        if not types:
            return
        for step in self._ordered_steps(flow):
            if step.step_type in types and (from_id is None or step.from_id == from_id):
                self._drop_runtime(flow, step)
                for message in flow.inflight.pop(step.sid, []):
                    self.store.delete_message(flow.flow_id, message.seq)
                self._end_step(flow, step, Phase.CANCELED)
        self._wake_lock_waiters(flow)

    # Locks ------------------------------------------------------------------------

    def _acquire(self, flow: Flow, holder: str, keys: Iterable[str]) -> bool:
        wanted = list(keys)
        if not wanted:
            return True
        locks = self._locks.setdefault(flow.flow_id, {})
        if any(locks.get(key, holder) != holder for key in wanted):
            return False
        for key in wanted:
            locks[key] = holder
        return True

    def _release(self, flow: Flow, holder: str) -> bool:
        locks = self._locks.get(flow.flow_id)
        if not locks:
            return False
        held = [key for key, owner in locks.items() if owner == holder]
        for key in held:
            del locks[key]
        return bool(held)

    def _wake_lock_waiters(self, flow: Flow) -> None:
        for step in self._ordered_steps(flow):
            if step.phase in (Phase.WAIT_FOR_LOCK, Phase.EXECUTE_LOCK):
                self._advance(flow, step)

    # Waiting conditions -----------------------------------------------------------

    def _evaluate(self, flow: Flow, step: StepExec) -> bool:
        condition = step.condition
        if condition is None:
            step.results = pb.ConditionResults()
            step.phase = Phase.EXECUTE_LOCK
            self._touch(flow, step)
            return True
        now = time.time()
        fired = set(step.skipped_timers)
        next_fire: float | None = None
        for index, timer in enumerate(condition.timer_conditions):
            fire_at = step.wait_started + max(0, timer.duration_seconds)
            if fire_at <= now:
                fired.add(index)
            elif index not in fired and (next_fire is None or fire_at < next_fire):
                next_fire = fire_at
        sizes = {
            c.channel_name: flow.channel_size(c.channel_name) for c in condition.channel_conditions
        }
        outcome = evaluate_wait(condition, WaitState(frozenset(fired), sizes))
        if outcome is None:
            if next_fire is not None:
                self._arm_wake(flow, step, next_fire)
            return False
        wake = self._wakes.pop((flow.flow_id, step.sid), None)
        if wake is not None:
            wake.cancel()
        results = pb.ConditionResults()
        completed_timers = set(outcome.completed_timers)
        for index, timer in enumerate(condition.timer_conditions):
            status = (
                pb.CONDITION_STATUS_COMPLETED
                if index in completed_timers
                else pb.CONDITION_STATUS_WAITING
            )
            results.timer_results.add(condition_id=timer.condition_id, condition_status=status)
        takes = dict(outcome.channel_takes)
        consumed = flow.inflight.setdefault(step.sid, [])
        for index, channel_condition in enumerate(condition.channel_conditions):
            result = results.channel_results.add(
                condition_id=channel_condition.condition_id,
                channel_name=channel_condition.channel_name,
                condition_status=pb.CONDITION_STATUS_WAITING,
            )
            if index not in takes:
                continue
            result.condition_status = pb.CONDITION_STATUS_COMPLETED
            queue = flow.channels.get(channel_condition.channel_name)
            for _ in range(takes[index]):
                if not queue:
                    break
                message = queue.popleft()
                consumed.append(message)
                result.values.append(message.value)
                self.store.consume_message(flow.flow_id, message.seq, step.sid)
        if not consumed:
            flow.inflight.pop(step.sid, None)
        step.results = results
        step.phase = Phase.EXECUTE_LOCK
        self._touch(flow, step)
        return True

    def _arm_wake(self, flow: Flow, step: StepExec, at: float) -> None:
        key = (flow.flow_id, step.sid)
        old = self._wakes.pop(key, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._wakes[key] = loop.call_later(max(0.0, at - time.time()), self._on_wake, flow, step)

    def _on_wake(self, flow: Flow, step: StepExec) -> None:
        self._wakes.pop((flow.flow_id, step.sid), None)
        if not flow.running or step.ended or flow.steps.get(step.sid) is not step:
            return
        with self._tx():
            self._advance(flow, step)
            self._after_change(flow)

    def _wake_waiting(self, flow: Flow) -> None:
        for step in self._ordered_steps(flow):
            if step.phase is Phase.WAITING:
                self._advance(flow, step)

    def _after_change(self, flow: Flow) -> None:
        """Serve lock waiters and waiting Steps after locks or Channels changed."""
        self._wake_lock_waiters(flow)
        self._wake_waiting(flow)
        self._check_graceful(flow)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        flow = self.flow(request.flow_id, active=True)
        sid = request.step_execution_id
        step_type, _, number = sid.rpartition("-")
        if not step_type or not number.isdigit():
            raise errors.invalid(f"step_execution_id {sid!r} is not '<StepType>-<n>'")
        if not request.timer_condition_id and not request.HasField("timer_condition_index"):
            raise errors.invalid("SkipTimer needs a timer_condition_id or timer_condition_index")
        index = request.timer_condition_index if request.HasField("timer_condition_index") else None
        with self._tx():
            step = flow.steps.get(sid)
            if step is None and sid in flow.ended_steps:
                return
            if step is None or step.phase is not Phase.WAITING or step.condition is None:
                flow.stale_skips.append(StaleSkip(sid, request.timer_condition_id, index))
                self._touch(flow)
                return
            self._apply_skip(flow, step, request.timer_condition_id, index)
            self._advance(flow, step)
            self._after_change(flow)

    def _apply_skip(self, flow: Flow, step: StepExec, condition_id: str, index: int | None) -> None:
        assert step.condition is not None
        timers = step.condition.timer_conditions
        chosen: int | None = None
        if condition_id:
            chosen = next(
                (i for i, timer in enumerate(timers) if timer.condition_id == condition_id), None
            )
        elif index is not None and 0 <= index < len(timers):
            chosen = index
        if chosen is not None:
            step.skipped_timers.add(chosen)
            self._touch(flow, step)

    # Tasks ------------------------------------------------------------------------

    def _dispatch_attempt(self, flow: Flow, step: StepExec) -> None:
        is_wait_for = step.phase is Phase.WAIT_FOR
        options = step.options
        timeout = (
            options.wait_for_timeout_seconds if is_wait_for else options.execute_timeout_seconds
        ) or DEFAULT_METHOD_TIMEOUT_SECONDS
        payload = (
            self._wait_for_request(flow, step) if is_wait_for else self._execute_request(flow, step)
        )
        task = Task(
            flow_id=flow.flow_id,
            flow_type=flow.flow_type,
            kind="wait_for" if is_wait_for else "execute",
            payload=payload,
            deadline=time.time() + timeout,
            on_assigned=self._on_assigned,
            on_frame=self._on_frame,
            on_lost=self._on_lost,
            push_address=None if flow.is_pull else flow.worker_address,
        )
        attempt = _Attempt(flow, step, task)
        attempt.method_timer = asyncio.get_running_loop().call_later(
            timeout, self._on_method_timeout, attempt, timeout
        )
        self._attempts[(flow.flow_id, step.sid)] = attempt
        self.dispatch.submit(task)

    def _attempt_of(self, task: Task) -> _Attempt | None:
        if task.kind == "rpc":
            return None
        payload = task.payload
        assert not isinstance(payload, pb.InvokeWorkerRPCRequest)
        attempt = self._attempts.get((task.flow_id, payload.context.step_execution_id))
        if attempt is None or attempt.task is not task:
            return None
        return attempt

    def _on_assigned(self, task: Task) -> None:
        attempt = self._attempt_of(task)
        if attempt is None:
            return
        flow, step = attempt.flow, attempt.step
        with self._tx():
            step.method.running = True
            self._touch(flow, step)
        self._arm_heartbeat(attempt)

    def _arm_heartbeat(self, attempt: _Attempt) -> None:
        seconds = attempt.step.options.heartbeat_timeout_seconds
        if seconds <= 0:
            return
        seconds = max(seconds, self.min_heartbeat_timeout)
        if attempt.heartbeat_timer is not None:
            attempt.heartbeat_timer.cancel()
        attempt.heartbeat_timer = asyncio.get_running_loop().call_later(
            seconds, self._on_heartbeat_timeout, attempt, seconds
        )

    def _on_method_timeout(self, attempt: _Attempt, seconds: int) -> None:
        self._time_out(
            attempt,
            f"{attempt.task.kind} method timeout: the attempt ran past {seconds} seconds",
            "dex_local_engine.MethodTimeout",
        )

    def _on_heartbeat_timeout(self, attempt: _Attempt, seconds: float) -> None:
        self._time_out(
            attempt,
            f"heartbeat timeout: no heartbeat within {seconds:g} seconds",
            "dex_local_engine.HeartbeatTimeout",
        )

    def _time_out(self, attempt: _Attempt, detail: str, error_type: str) -> None:
        flow, step, task = attempt.flow, attempt.step, attempt.task
        if self._attempts.get((flow.flow_id, step.sid)) is not attempt or task.done:
            return
        started = task.started
        self.dispatch.cancel(task)
        error = pb.WorkerErrorResponse(
            detail=detail,
            error_type=error_type,
            grpc_status=grpc.StatusCode.DEADLINE_EXCEEDED.value[0],
        )
        with self._tx():
            self._attempt_failed(flow, step, error, started=started)
            self._after_change(flow)

    def _on_lost(self, task: Task, started: bool, detail: str) -> None:
        attempt = self._attempt_of(task)
        if attempt is None or self.closing:
            # While the engine stops, its streams end too: the attempt stays marked as
            # running and counts as failed when the engine starts again.
            return
        lost = (
            grpc.StatusCode.RESOURCE_EXHAUSTED
            if task.undeliverable
            else grpc.StatusCode.UNAVAILABLE
        )
        error = pb.WorkerErrorResponse(
            detail=detail,
            error_type="dex_local_engine.TaskTooLarge"
            if task.undeliverable
            else "dex_local_engine.WorkerLost",
            grpc_status=lost.value[0],
        )
        with self._tx():
            self._attempt_failed(
                attempt.flow, attempt.step, error, started=started, retry=not task.undeliverable
            )
            self._after_change(attempt.flow)

    def _on_frame(self, task: Task, frame: pb.PollWorkerTaskFrame) -> None:
        attempt = self._attempt_of(task)
        if attempt is None:
            return
        flow, step = attempt.flow, attempt.step
        kind = frame.WhichOneof("output")
        if kind == "worker_error":
            # A result refused for its size would come back the same: no retry.
            oversized = frame.worker_error.error_type == VALUE_TOO_LARGE_ERROR_TYPE
            with self._tx():
                self._attempt_failed(
                    flow, step, frame.worker_error, started=True, retry=not oversized
                )
                self._after_change(flow)
            return
        output = frame.wait_for if kind == "wait_for" else frame.execute
        which = output.WhichOneof("output")
        if which == "heartbeat":
            with self._tx():
                heartbeat = output.heartbeat
                step.method.checkpoint = heartbeat.value if heartbeat.HasField("value") else None
                self._touch(flow, step)
            self._arm_heartbeat(attempt)
        elif which == "stream_write":
            write = output.stream_write
            if write.stream_name and write.HasField("value"):
                self.streams.write(
                    flow_type=flow.flow_type,
                    stream=write.stream_name,
                    flow_id=flow.flow_id,
                    value=write.value,
                    capacity=int(write.stream_capacity_bytes),
                    source=f"#{step.sid}",
                )
            self._arm_heartbeat(attempt)
        elif which == "result":
            problem = result_problem(frame)
            if problem is not None:
                # Dex rejects such a result: the attempt fails and the Step's policy applies.
                with self._tx():
                    self._attempt_failed(
                        flow,
                        step,
                        pb.WorkerErrorResponse(
                            detail=problem,
                            error_type="dex_local_engine.InvalidResult",
                            grpc_status=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                        ),
                        started=True,
                    )
                    self._after_change(flow)
                return
            self._attempts.pop((flow.flow_id, step.sid), None)
            attempt.cancel_timers()
            with self._tx():
                step.method.running = False
                if kind == "wait_for" and step.phase is Phase.WAIT_FOR:
                    self._wait_for_completed(flow, step, frame.wait_for.result)
                elif kind == "execute" and step.phase is Phase.EXECUTE:
                    self._execute_completed(flow, step, frame.execute.result)
                self._after_change(flow)

    def _attempt_failed(
        self,
        flow: Flow,
        step: StepExec,
        error: pb.WorkerErrorResponse,
        *,
        started: bool,
        retry: bool = True,
    ) -> None:
        attempt = self._attempts.pop((flow.flow_id, step.sid), None)
        if attempt is not None:
            attempt.cancel_timers()
        method = step.method
        method.running = False
        method.last_error = error
        if started:
            method.started_attempts += 1
        is_wait_for = step.phase is Phase.WAIT_FOR
        options = step.options
        has_policy = options.HasField(
            "wait_for_retry_policy" if is_wait_for else "execute_retry_policy"
        )
        policy = (
            (options.wait_for_retry_policy if is_wait_for else options.execute_retry_policy)
            if has_policy
            else None
        )
        now = time.time()
        try:
            delay = next_retry_delay(
                policy,
                attempt=method.attempt,
                first_attempt_at=method.first_attempt_at,
                now=now,
                retry_after_seconds=float(error.retry_after_seconds) or None,
            )
        except ValueError as invalid_policy:  # accepted before validation existed
            _LOG.warning("flow %s step %s: %s", flow.flow_id, step.sid, invalid_policy)
            delay = None
        _LOG.info(
            "flow %s step %s %s attempt %d failed: %s",
            flow.flow_id,
            step.sid,
            step.phase.value,
            method.attempt,
            error.detail,
        )
        self._touch(flow, step)
        if delay is not None and retry:
            method.attempt += 1
            method.retry_at = now + delay
            self._arm_wake(flow, step, method.retry_at)
            return
        self._method_failed(flow, step, error)

    def _method_failed(self, flow: Flow, step: StepExec, error: pb.WorkerErrorResponse) -> None:
        method = step.method
        is_wait_for = step.phase is Phase.WAIT_FOR
        recovery = recovery_error_info(
            error.detail, error.error_type, started=method.started_attempts > 0
        )
        failure = pb.StepMethodFailedOutput(
            failure=pb.StepMethodFailure(
                backend_error=error.detail,
                details=pb.ServiceErrorResponse(
                    detail=error.detail,
                    sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                    original_worker_error_detail=error.detail,
                    original_worker_error_type=error.error_type,
                    original_worker_error_status=error.grpc_status,
                    original_worker_error_stack_trace=error.stack_trace,
                ),
                attempt=method.attempt,
            )
        )
        context = self._event_context(step)
        event_input = pb.StepMethodEventInput(step_input=step.step_input)
        self._release(flow, step.sid)
        if is_wait_for:
            self._record(
                flow,
                pb.FlowHistoryEvent(
                    step_wait_for_failed=pb.StepWaitForFailedEvent(
                        input=event_input, output=failure, context=context
                    )
                ),
            )
            if options_proceed_on_wait_for_failure(step.options):
                step.wait_for_failed = True
                step.recovery = recovery
                step.results = pb.ConditionResults(wait_for_failed=True)
                step.phase = Phase.EXECUTE_LOCK
                self._touch(flow, step)
                self._advance(flow, step)
                return
        else:
            self._record(
                flow,
                pb.FlowHistoryEvent(
                    step_execute_failed=pb.StepExecuteFailedEvent(
                        input=event_input, output=failure, context=context
                    )
                ),
            )
            options = step.options
            if (
                options.execute_failure_policy
                == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
                and options.execute_failure_proceed_step_type
            ):
                for message in flow.inflight.pop(step.sid, []):
                    self.store.delete_message(flow.flow_id, message.seq)
                self._end_step(flow, step, Phase.FAILED)
                movement = pb.StepMovement(
                    step_type=options.execute_failure_proceed_step_type,
                    step_input=step.step_input,
                    step_options=options.execute_failure_proceed_step_options,
                )
                self._start_steps(flow, [movement], from_id=step.sid, recovery=recovery)
                return
        self._end_step(flow, step, Phase.FAILED)
        # As in Dex, the Flow's error message is the Worker error's detail, unchanged.
        self._close_flow(
            flow, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, error.detail
        )

    def _event_context(self, step: StepExec) -> pb.StepMethodEventContext:
        return pb.StepMethodEventContext(
            step_execution_id=step.sid,
            from_step_execution_id=step.from_id,
            step_type=step.step_type,
            final_attempt=step.method.attempt,
            started_time=_stamp(step.method.first_attempt_at),
        )

    def _wait_for_completed(
        self, flow: Flow, step: StepExec, result: pb.InvokeWaitForMethodResponse
    ) -> None:
        self._apply_effects(
            flow,
            list(result.upsert_attributes),
            list(result.publish_to_channel),
            list(result.delete_from_channel),
            strict=False,
        )
        for kv in result.upsert_step_exe_locals:
            step.locals[kv.key] = kv.value
        self._record(
            flow,
            pb.FlowHistoryEvent(
                step_wait_for_completed=pb.StepWaitForCompletedEvent(
                    input=pb.StepMethodEventInput(step_input=step.step_input),
                    output=pb.StepWaitForCompletedOutput(
                        wait_for_condition=result.waiting_condition,
                        upsert_attributes=result.upsert_attributes,
                        publish_to_channel=result.publish_to_channel,
                        record_events=result.record_events,
                        upsert_step_execution_locals=result.upsert_step_exe_locals,
                        delete_from_channel=result.delete_from_channel,
                    ),
                    context=self._event_context(step),
                )
            ),
        )
        self._release(flow, step.sid)
        if result.HasField("waiting_condition"):
            step.condition = result.waiting_condition
            step.wait_started = time.time()
            step.phase = Phase.WAITING
            remaining: list[StaleSkip] = []
            for skip in flow.stale_skips:
                if skip.sid == step.sid:
                    self._apply_skip(flow, step, skip.condition_id, skip.index)
                else:
                    remaining.append(skip)
            if len(remaining) != len(flow.stale_skips):
                flow.stale_skips = remaining
                self._touch(flow)
        else:
            step.results = pb.ConditionResults()
            step.phase = Phase.EXECUTE_LOCK
        self._touch(flow, step)
        self._advance(flow, step)

    def _execute_completed(
        self, flow: Flow, step: StepExec, result: pb.InvokeExecuteMethodResponse
    ) -> None:
        self._apply_effects(
            flow,
            list(result.upsert_attributes),
            list(result.publish_to_channel),
            list(result.delete_from_channel),
            strict=False,
        )
        self._record(
            flow,
            pb.FlowHistoryEvent(
                step_execute_completed=pb.StepExecuteCompletedEvent(
                    input=pb.StepMethodEventInput(step_input=step.step_input),
                    output=pb.StepExecuteCompletedOutput(
                        step_decision=result.step_decision,
                        upsert_attributes=result.upsert_attributes,
                        publish_to_channel=result.publish_to_channel,
                        record_events=result.record_events,
                        delete_from_channel=result.delete_from_channel,
                    ),
                    context=self._event_context(step),
                )
            ),
        )
        for message in flow.inflight.pop(step.sid, []):
            self.store.delete_message(flow.flow_id, message.seq)
        self._release(flow, step.sid)
        self._end_step(flow, step, Phase.COMPLETED)
        decision = result.step_decision
        self._cancel_steps(flow, decision.cancel_step_types, None)
        self._cancel_steps(flow, decision.cancel_sibling_step_types, step.from_id)
        plan = plan_close(decision, lambda name: self._channel_drained(flow, name))
        if plan.output is not None:
            flow.outputs.append(
                pb.StepCompletionOutput(
                    completed_step_type=step.step_type,
                    completed_step_execution_id=step.sid,
                    completed_step_output=plan.output,
                )
            )
        if plan.effect is FlowEffect.FAIL:
            self._close_flow(
                flow,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
                plan.reason,
            )
            return
        if plan.effect is FlowEffect.COMPLETE:
            self._close_flow(flow, pb.FLOW_STATUS_COMPLETED, 0, "")
            return
        if plan.effect is FlowEffect.GRACEFUL:
            flow.graceful = True
        if plan.output is not None or plan.effect is FlowEffect.GRACEFUL:
            self._touch(flow)
        if plan.start_next_steps:
            self._start_steps(flow, _trusted(decision.next_steps), from_id=step.sid)
        self._check_graceful(flow)

    def _channel_drained(self, flow: Flow, name: str) -> bool:
        if flow.channel_size(name):
            return False
        return not any(m.channel == name for msgs in flow.inflight.values() for m in msgs)

    # Effects ----------------------------------------------------------------------

    def _apply_attribute_writes(self, flow: Flow, writes: Iterable[pb.AttributeWrite]) -> None:
        for write in writes:
            if not write.key:
                continue
            if not write.HasField("value") or _is_null(write.value):
                if flow.attributes.pop(write.key, None) is not None:
                    self.store.put_attribute(flow.flow_id, write.key, None)
            else:
                flow.attributes[write.key] = write.value
                self.store.put_attribute(flow.flow_id, write.key, write.value.SerializeToString())
        self._notify.add(flow.flow_id)

    def _find_message(self, flow: Flow, channel: str, message_id: str) -> ChannelMsg | None:
        queue = flow.channels.get(channel)
        if not queue:
            return None
        return next((m for m in queue if m.message_id == message_id), None)

    def _apply_effects(
        self,
        flow: Flow,
        writes: list[pb.AttributeWrite],
        publications: list[pb.ChannelMessage],
        deletions: list[pb.ChannelMessageDeletion],
        *,
        strict: bool,
    ) -> None:
        if strict:
            for deletion in deletions:
                if self._find_message(flow, deletion.channel_name, deletion.message_id) is None:
                    raise DexError(
                        grpc.StatusCode.NOT_FOUND,
                        pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
                        f"message {deletion.message_id!r} is not in Channel "
                        f"{deletion.channel_name!r}",
                    )
        self._apply_attribute_writes(flow, writes)
        for deletion in deletions:
            message = self._find_message(flow, deletion.channel_name, deletion.message_id)
            if message is not None:
                flow.channels[deletion.channel_name].remove(message)
                self.store.delete_message(flow.flow_id, message.seq)
        for publication in publications:
            if not publication.channel_name:
                continue
            value = publication.value if publication.HasField("value") else _null()
            message = ChannelMsg(flow.next_seq, publication.channel_name, uuid7(), value)
            flow.next_seq += 1
            flow.channels.setdefault(message.channel, deque()).append(message)
            self.store.add_message(
                flow.flow_id,
                message.seq,
                message.channel,
                message.message_id,
                value.SerializeToString(),
            )
        self._notify.add(flow.flow_id)

    # Requests to Workers ----------------------------------------------------------

    def _context(self, flow: Flow, step: StepExec) -> pb.Context:
        context = pb.Context(
            flow_id=flow.flow_id,
            run_id=flow.run_id,
            flow_started_timestamp=int(flow.start_time),
            step_execution_id=step.sid,
            first_attempt_timestamp=int(step.method.first_attempt_at),
            attempt=step.method.attempt,
            from_step_execution_id=step.from_id,
        )
        if step.recovery is not None:
            context.recovery_error.CopyFrom(step.recovery)
        if step.method.checkpoint is not None:
            context.last_heartbeat_value.CopyFrom(step.method.checkpoint)
        return context

    def _attributes(self, flow: Flow, loaded_maps: Iterable[str] | None = None) -> list[pb.KV]:
        """Singleton Attributes, plus the AttributeMap instances that were loaded.

        Persistence names cannot contain '/', so a key with one is a map instance
        (``name/instance``); the SDK refuses to read instances that were not loaded, so
        they are left out and tasks stay small.
        """
        if loaded_maps is None:
            return [pb.KV(key=key, value=value) for key, value in flow.attributes.items()]
        loaded = set(loaded_maps)
        kept: list[pb.KV] = []
        for key, value in flow.attributes.items():
            name, slash, _ = key.partition("/")
            if not slash or key in loaded or f"{name}/" in loaded:
                kept.append(pb.KV(key=key, value=value))
        return kept

    def _channel_infos(self, flow: Flow) -> dict[str, int]:
        return {name: len(queue) for name, queue in flow.channels.items() if queue}

    def _loaded_messages(
        self, flow: Flow, names: Iterable[str], map_instances: Iterable[str]
    ) -> dict[str, pb.ChannelValues]:
        wanted: list[str] = list(names)
        for instance in map_instances:
            if instance.endswith("/"):
                wanted.extend(name for name in flow.channels if name.startswith(instance))
            else:
                wanted.append(instance)
        loaded: dict[str, pb.ChannelValues] = {}
        for name in wanted:
            values = pb.ChannelValues()
            for message in flow.channels.get(name, ()):
                values.messages.add(
                    channel_name=name, value=message.value, message_id=message.message_id
                )
            loaded[name] = values
        return loaded

    def _wait_for_request(self, flow: Flow, step: StepExec) -> pb.InvokeWaitForMethodRequest:
        options = step.options
        request = pb.InvokeWaitForMethodRequest(
            context=self._context(flow, step),
            flow_type=flow.flow_type,
            step_type=step.step_type,
            step_input=step.step_input,
            attributes=self._attributes(flow, options.wait_for_load_attribute_map_instances),
            loaded_attribute_map_instances=options.wait_for_load_attribute_map_instances,
            loaded_channel_names=options.wait_for_load_channel_names,
            loaded_channel_map_instances=options.wait_for_load_channel_map_instances,
        )
        for name, size in self._channel_infos(flow).items():
            request.channel_infos[name].size = size
        loaded = self._loaded_messages(
            flow, options.wait_for_load_channel_names, options.wait_for_load_channel_map_instances
        )
        for name, values in loaded.items():
            request.loaded_channel_messages[name].CopyFrom(values)
        return request

    def _execute_request(self, flow: Flow, step: StepExec) -> pb.InvokeExecuteMethodRequest:
        options = step.options
        request = pb.InvokeExecuteMethodRequest(
            context=self._context(flow, step),
            flow_type=flow.flow_type,
            step_type=step.step_type,
            step_input=step.step_input,
            attributes=self._attributes(flow, options.execute_load_attribute_map_instances),
            step_exe_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
            condition_results=step.results or pb.ConditionResults(),
            loaded_attribute_map_instances=options.execute_load_attribute_map_instances,
            loaded_channel_names=options.execute_load_channel_names,
            loaded_channel_map_instances=options.execute_load_channel_map_instances,
        )
        for name, size in self._channel_infos(flow).items():
            request.channel_infos[name].size = size
        loaded = self._loaded_messages(
            flow, options.execute_load_channel_names, options.execute_load_channel_map_instances
        )
        for name, values in loaded.items():
            request.loaded_channel_messages[name].CopyFrom(values)
        if step.step_type == TIMEOUT_HANDLER_STEP_TYPE:
            request.ClearField("step_input")  # the SDK requires the handler's input absent
        return request

    # RPCs -------------------------------------------------------------------------

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        flow = self.flow(request.flow_id, active=True)
        if not request.rpc_name:
            raise errors.invalid("InvokeRPC needs an rpc_name")
        holder = f"rpc:{uuid7()}"
        keys = sorted(set(request.lock_attribute_keys))
        if not self._acquire(flow, holder, keys):
            raise DexError(
                grpc.StatusCode.ABORTED,
                pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                f"RPC {request.rpc_name!r} could not lock Attributes {keys}: another Step or "
                "RPC holds a lock",
            )
        try:
            rpc_request = pb.InvokeWorkerRPCRequest(
                context=pb.Context(
                    flow_id=flow.flow_id,
                    run_id=flow.run_id,
                    flow_started_timestamp=int(flow.start_time),
                ),
                flow_type=flow.flow_type,
                rpc_name=request.rpc_name,
                input=request.input if request.HasField("input") else _null(),
                attributes=self._attributes(flow, request.load_attribute_map_instances),
                loaded_attribute_map_instances=request.load_attribute_map_instances,
                loaded_channel_names=request.load_channel_names,
                loaded_channel_map_instances=request.load_channel_map_instances,
            )
            for name, size in self._channel_infos(flow).items():
                rpc_request.channel_infos[name].size = size
            loaded = self._loaded_messages(
                flow, request.load_channel_names, request.load_channel_map_instances
            )
            for name, values in loaded.items():
                rpc_request.loaded_channel_messages[name].CopyFrom(values)
            frame = await self._call_rpc(flow, rpc_request, request.timeout_seconds)
            if frame.WhichOneof("output") == "worker_error":
                error = frame.worker_error
                raise DexError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                    f"RPC {request.rpc_name!r} failed: {error.detail}",
                    worker_error=error,
                )
            response = frame.rpc
            if not flow.running or self.flows.get(flow.flow_id) is not flow:
                raise DexError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    pb.ERROR_SUB_STATUS_FLOW_CLOSING,
                    f"Flow {flow.flow_id!r} closed while RPC {request.rpc_name!r} ran",
                )
            for movement in response.step_decision.next_steps:
                if not movement.step_type:
                    raise errors.invalid(
                        f"RPC {request.rpc_name!r} returned a movement without a Step type"
                    )
                validate_step_options(movement.step_options)
            decision = response.step_decision
            has_effects = bool(
                response.upsert_attributes
                or response.publish_to_channel
                or response.delete_from_channel
                or decision.next_steps
                or decision.cancel_step_types
            )
            if not has_effects:  # a pure query: nothing to commit
                output = response.output if response.HasField("output") else _null()
                return pb.InvokeRPCResponse(output=output)
            with self._tx():
                self._apply_effects(
                    flow,
                    list(response.upsert_attributes),
                    list(response.publish_to_channel),
                    list(response.delete_from_channel),
                    strict=request.is_transactional or bool(keys),
                )
                self._record(
                    flow,
                    pb.FlowHistoryEvent(
                        rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                            rpc_name=request.rpc_name,
                            input=rpc_request.input,
                            output=response.output,
                            step_decision=response.step_decision,
                            upsert_attributes=response.upsert_attributes,
                            record_events=response.record_events,
                            publish_to_channel=response.publish_to_channel,
                            delete_from_channel=response.delete_from_channel,
                        )
                    ),
                )
                self._cancel_steps(flow, decision.cancel_step_types, None)
                self._start_steps(
                    flow,
                    _trusted(decision.next_steps),
                    from_id=f"{RPC_FROM_PREFIX}{request.rpc_name}",
                )
                if self._release(flow, holder):
                    self._wake_lock_waiters(flow)
                self._after_change(flow)
            output = response.output if response.HasField("output") else _null()
            return pb.InvokeRPCResponse(output=output)
        finally:
            if self._release(flow, holder) and flow.running:
                with self._tx():
                    self._after_change(flow)

    async def _call_rpc(
        self, flow: Flow, request: pb.InvokeWorkerRPCRequest, timeout_seconds: int
    ) -> pb.PollWorkerTaskFrame:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[pb.PollWorkerTaskFrame] = loop.create_future()
        timeout = timeout_seconds if timeout_seconds > 0 else DEFAULT_RPC_TIMEOUT_SECONDS

        def on_frame(task: Task, frame: pb.PollWorkerTaskFrame) -> None:
            if not result.done():
                result.set_result(frame)

        def on_lost(task: Task, started: bool, detail: str) -> None:
            if not result.done():
                result.set_exception(
                    DexError(
                        grpc.StatusCode.RESOURCE_EXHAUSTED
                        if task.undeliverable
                        else grpc.StatusCode.UNAVAILABLE,
                        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                        f"RPC {request.rpc_name!r}: {detail}",
                    )
                )

        task = Task(
            flow_id=flow.flow_id,
            flow_type=flow.flow_type,
            kind="rpc",
            payload=request,
            deadline=time.time() + timeout,
            on_assigned=lambda _task: None,
            on_frame=on_frame,
            on_lost=on_lost,
            push_address=None if flow.is_pull else flow.worker_address,
        )
        self.dispatch.submit(task)
        try:
            return await asyncio.wait_for(result, timeout)
        except TimeoutError:
            raise DexError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                pb.ERROR_SUB_STATUS_REQUEST_TIMEOUT,
                f"RPC {request.rpc_name!r} did not finish within {timeout} seconds",
            ) from None
        finally:
            self.dispatch.cancel(task)

    # Direct state access (PublishToChannel, SetAttributes, GetAttributes) -----------

    def publish(self, request: pb.PublishToChannelRequest) -> None:
        flow = self.flow(request.flow_id, active=True)
        self._check_run(flow, request.run_id)
        if any(not message.channel_name for message in request.messages):
            raise errors.invalid("every message needs a channel_name")
        with self._tx():
            self._apply_effects(flow, [], list(request.messages), [], strict=False)
            self._record(
                flow,
                pb.FlowHistoryEvent(
                    channel_external_publish=pb.ChannelExternalPublishEvent(
                        messages=request.messages
                    )
                ),
            )
            self._after_change(flow)

    def set_attributes(self, request: pb.SetAttributesRequest) -> None:
        flow = self.flow(request.flow_id, active=True)
        self._check_run(flow, request.run_id)
        if any(not write.key for write in request.attributes):
            raise errors.invalid("every Attribute write needs a key")
        with self._tx():
            self._apply_attribute_writes(flow, request.attributes)
            self._after_change(flow)

    def get_attributes(self, request: pb.GetAttributesRequest) -> pb.GetAttributesResponse:
        flow = self.flow(request.flow_id, active=False)
        self._check_run(flow, request.run_id)
        if not flow.running and not flow.attributes:
            for key, value in self.store.attributes(flow.flow_id):
                parsed = pb.Value()
                parsed.ParseFromString(value)
                flow.attributes[key] = parsed
        keys = list(flow.attributes) if request.all_keys else list(request.keys)
        return pb.GetAttributesResponse(
            attributes=[
                pb.KV(key=key, value=flow.attributes[key]) for key in keys if key in flow.attributes
            ]
        )

    def flow_state(self, flow: Flow) -> pb.GetFlowStateResponse:
        """A partial GetFlowState: config, Attributes, active Steps and pending messages."""
        response = pb.GetFlowStateResponse(flow_config=flow.config)
        response.attributes.extend(self._attributes(flow))
        for step in self._ordered_steps(flow):
            state = response.active_step_executions.add(
                step_execution_id=step.sid,
                from_step_execution_id=step.from_id,
                step_type=step.step_type,
                phase=pb.ACTIVE_STEP_PHASE_WAITING
                if step.phase is Phase.WAITING
                else pb.ACTIVE_STEP_PHASE_ACTIVE,
                movement=pb.StepMovement(
                    step_type=step.step_type,
                    step_input=step.step_input,
                    step_options=step.options,
                ),
                step_execution_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
            )
            error = step.method.last_error
            if error is not None:
                state.last_failure_info.CopyFrom(
                    pb.StepMethodFailure(
                        backend_error=error.detail,
                        attempt=max(1, step.method.attempt - 1)
                        if step.method.retry_at is not None
                        else step.method.attempt,
                        details=pb.ServiceErrorResponse(
                            detail=error.detail,
                            sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                            original_worker_error_detail=error.detail,
                            original_worker_error_type=error.error_type,
                            original_worker_error_status=error.grpc_status,
                            original_worker_error_stack_trace=error.stack_trace,
                        ),
                    )
                )
        for name, queue in flow.channels.items():
            if queue:
                values = response.pending_channel_messages[name]
                for message in queue:
                    values.messages.add(
                        channel_name=name, value=message.value, message_id=message.message_id
                    )
        response.completed_steps.extend(flow.outputs)
        return response

    def _check_run(self, flow: Flow, run_id: str) -> None:
        if run_id and run_id != flow.run_id:
            raise errors.flow_not_found(f"{flow.flow_id}/{run_id}", active=flow.running)

    # Queries ----------------------------------------------------------------------

    def summary(self, flow: Flow) -> pb.GetFlowSummaryResponse:
        response = pb.GetFlowSummaryResponse(
            flow_execution_id=pb.FlowExecutionID(flow_id=flow.flow_id, run_id=flow.run_id),
            first_run_id=flow.run_id,
            request_id=flow.request_id,
            flow_type=flow.flow_type,
            flow_status=cast(pb.FlowStatus, flow.status),
            start_time=_stamp(flow.start_time),
        )
        if not flow.running:
            response.close_time.CopyFrom(_stamp(flow.close_time))
        return response

    def history(
        self, flow: Flow, start_event_id: int, page_size: int
    ) -> pb.GetHistoryEventsResponse:
        size = page_size if page_size > 0 else 1000
        start = max(1, start_event_id)
        rows = self.store.events(flow.flow_id, start, size + 1)
        response = pb.GetHistoryEventsResponse()
        for data in rows[:size]:
            event = response.events.add()
            event.ParseFromString(data)
        if len(rows) > size:
            response.next_internal_event_id = response.events[-1].event_id + 1
            response.next_page_token = str(response.next_internal_event_id).encode()
        return response

    async def close(self) -> None:
        self.closing = True
        for attempt in list(self._attempts.values()):
            attempt.cancel_timers()
        for handle in list(self._wakes.values()) + list(self._flow_timers.values()):
            handle.cancel()
        await self.dispatch.close()


def validate_step_options(options: pb.StepOptions) -> None:
    """Reject StepOptions Dex would reject (bad retry policies), as INVALID_ARGUMENT."""
    try:
        for field in ("wait_for_retry_policy", "execute_retry_policy"):
            if options.HasField(field):
                effective_retry_policy(getattr(options, field))
        if options.HasField("execute_failure_proceed_step_options"):
            validate_step_options(options.execute_failure_proceed_step_options)
    except ValueError as error:
        raise errors.invalid(f"invalid StepOptions: {error}") from None


def result_problem(frame: pb.PollWorkerTaskFrame) -> str | None:
    """Why a Step method result cannot be applied, or None when it can."""
    try:
        if frame.WhichOneof("output") == "wait_for":
            result = frame.wait_for.result
            if result.HasField("waiting_condition"):
                validate_waiting_condition(result.waiting_condition)
        else:
            for movement in frame.execute.result.step_decision.next_steps:
                if not movement.step_type:
                    return "a Step movement has no step_type"
                validate_step_options(movement.step_options)
    except DexError as error:
        return error.detail
    except ValueError as error:
        return str(error)
    return None


def options_proceed_on_wait_for_failure(options: pb.StepOptions) -> bool:
    return options.wait_for_failure_policy == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE


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


def _trusted(movements: Iterable[pb.StepMovement]) -> list[pb.StepMovement]:
    """Movements with the fields only the engine may set cleared."""
    cleaned: list[pb.StepMovement] = []
    for movement in movements:
        copy = pb.StepMovement()
        copy.CopyFrom(movement)
        copy.ClearField("from_step_execution_id_internal_only")
        copy.ClearField("recovery_error_internal_only")
        cleaned.append(copy)
    return cleaned


def _null() -> pb.Value:
    return pb.Value(null_value=cast(struct_pb2.NullValue, struct_pb2.NULL_VALUE))
