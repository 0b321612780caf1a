"""Continue-as-new: a running Flow moves to a new run that carries its whole state.

A Flow continues as new once its run has recorded
``FlowConfig.continue_as_new_threshold`` history events after its start (0 turns
this off), or when a Client calls ``TriggerContinueAsNew``. The switch happens at
the end of the transition that reached the threshold: the Flow gets a new run ID,
its history restarts with a ``flow_started_or_continued`` event whose
``continued_start`` names the previous run and carries the Attributes and
completed Step outputs, and everything else (active Steps with their execution IDs
and phases, running attempts, Channels, locks, Timers, SubFlow children) continues
unchanged. The engine keeps only the current run's history, so a Flow that
continued as new can no longer be reset to its beginning.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Flow
from dex_local_engine._rules.values import uuid7


def continue_flow(engine: EngineState, flow: Flow) -> None:
    """Move a running Flow to a new run that carries its state."""
    if not flow.running:
        return
    previous = flow.run_id
    flow.run_id = uuid7()
    engine.store.delete_history(flow.flow_id)
    flow.next_event_id = 1
    engine.touch(flow)
    engine.record(
        flow,
        pb.FlowHistoryEvent(
            flow_started_or_continued=pb.FlowStartedOrContinuedHistoryEvent(
                flow_execution_id=pb.FlowExecutionID(flow_id=flow.flow_id, run_id=flow.run_id),
                flow_type=flow.flow_type,
                flow_config=flow.config,
                continued_start=pb.FlowContinuedStart(
                    previous_run_id=previous,
                    attributes=[pb.KV(key=k, value=v) for k, v in flow.attributes.items()],
                    completed_steps=flow.outputs,
                ),
            )
        ),
    )


def trigger(engine: EngineState, request: pb.TriggerContinueAsNewRequest) -> None:
    """TriggerContinueAsNew: continue a running Flow as new now."""
    flow = engine.flow(request.flow_id, active=True)
    if request.run_id and request.run_id != flow.run_id:
        raise errors.flow_not_found(f"{flow.flow_id}/{request.run_id}", active=True)
    with engine.tx():
        continue_flow(engine, flow)
