"""Start-up: load every Flow from the store and resume the running ones."""

from __future__ import annotations

import logging
from collections import deque

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import flows, indexes, steps, tasks
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.model import METHOD_PHASES, ChannelMsg, Flow, Phase, StepExec

_LOG = logging.getLogger("dex_local_engine")
_NAMED_ATTEMPTS = 10
"""Interrupted attempts the recovery line names; the rest are counted."""


def recover(engine: EngineState) -> None:
    """Load every Flow and resume the running ones after a restart."""
    engine.streams.load()
    indexes.load_indexes(engine)
    for row in engine.store.flows():
        flow = Flow.from_row(row.flow_id, row.run_id, row.flow_type, row.status, row.meta)
        engine.flows[flow.flow_id] = engine.adopt(flow)  # Attributes load on first use
        flow.next_event_id = max(flow.next_event_id, engine.store.last_event_id(flow.flow_id) + 1)
        for data in engine.store.steps(flow.flow_id):
            step = StepExec.from_json(data)
            flow.counters[step.step_type] = max(flow.counters.get(step.step_type, 0), step.number)
            flow.next_order = max(flow.next_order, step.order + 1)
            if not step.ended and flow.running:
                flow.steps[step.sid] = step
        if not flow.running:
            continue
        for seq, channel, message_id, value, consumer in engine.store.messages(flow.flow_id):
            parsed = pb.Value()
            parsed.ParseFromString(value)
            message = ChannelMsg(seq, channel, message_id, parsed)
            flow.next_seq = max(flow.next_seq, seq + 1)
            if consumer is None:
                flow.channels.setdefault(channel, deque()).append(message)
            else:
                flow.inflight.setdefault(consumer, []).append(message)
    running = [flow for flow in engine.flows.values() if flow.running]
    interrupted: list[str] = []
    with engine.tx():
        for flow in running:
            locks = engine.locks.setdefault(flow.flow_id, {})
            for step in steps.ordered_steps(flow):
                if step.phase is Phase.WAIT_FOR:
                    for key in step.options.wait_for_lock_attribute_keys:
                        locks[key] = step.sid
                elif step.phase is Phase.EXECUTE:
                    for key in step.options.execute_lock_attribute_keys:
                        locks[key] = step.sid
        for flow in running:
            flows.arm_flow_timeout(engine, flow)
            for step in steps.ordered_steps(flow):
                if step.phase in METHOD_PHASES and step.method.running:
                    error = pb.WorkerErrorResponse(
                        detail="the engine stopped while this attempt was running",
                        error_type="dex_local_engine.EngineRestarted",
                        grpc_status=grpc.StatusCode.UNAVAILABLE.value[0],
                    )
                    tasks.attempt_failed(engine, flow, step, error, started=True, log=False)
                    interrupted.append(f"{flow.flow_id}/{step.sid}")
            for step in steps.ordered_steps(flow):
                steps.advance(engine, flow, step)
            flows.check_graceful(engine, flow)
    if interrupted:
        named = ", ".join(interrupted[:_NAMED_ATTEMPTS])
        more = len(interrupted) - _NAMED_ATTEMPTS
        _LOG.info(
            "%d Step attempts were running when the engine stopped; each runs again under "
            "its retry policy: %s%s",
            len(interrupted),
            named,
            f" and {more} more" if more > 0 else "",
        )
