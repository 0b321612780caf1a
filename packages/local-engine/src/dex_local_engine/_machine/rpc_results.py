"""The transitions of an RPC call: applying its result, and freeing its locks.

``dex_local_engine._api.rpcs`` runs the call (locks, the Worker, the wait); what the
result does to the Flow commits here in one transaction.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import effects, locks, steps, wakeups
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.constants import RPC_FROM_PREFIX
from dex_local_engine._rules.model import Flow
from dex_local_engine._rules.validation import trusted_movements


def apply_result(
    engine: EngineState,
    flow: Flow,
    request: pb.InvokeRPCRequest,
    rpc_request: pb.InvokeWorkerRPCRequest,
    response: pb.InvokeWorkerRPCResponse,
    holder: str,
    *,
    strict: bool,
) -> None:
    """Apply an RPC result's effects, record it, cancel and start its Steps, free its
    locks and serve the waiting Steps, in one transaction.

    With ``strict`` (a transactional or locking RPC) a deletion of a missing message
    fails the whole result before anything changes."""
    decision = response.step_decision
    with engine.tx():
        effects.apply_effects(
            engine,
            flow,
            list(response.upsert_attributes),
            list(response.publish_to_channel),
            list(response.delete_from_channel),
            strict=strict,
        )
        engine.record(
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
        steps.cancel_steps(engine, flow, decision.cancel_step_types, None)
        steps.start_steps(
            engine,
            flow,
            trusted_movements(decision.next_steps),
            from_id=f"{RPC_FROM_PREFIX}{request.rpc_name}",
        )
        if locks.release(engine, flow, holder):
            steps.wake_lock_waiters(engine, flow)
        wakeups.after_change(engine, flow)


def release_locks(engine: EngineState, flow: Flow, holder: str) -> None:
    """Free what an RPC still holds and, if it held anything, serve the waiting Steps."""
    if locks.release(engine, flow, holder) and flow.running:
        with engine.tx():
            wakeups.after_change(engine, flow)
