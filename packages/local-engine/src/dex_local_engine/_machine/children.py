"""A waiting Step's SubFlows as its wait sees them: their IDs, which closed, their results.

``subflows`` starts the children and ``flows`` tells a parent when one closes; this
module only reads them.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.model import Flow, StepExec, flow_result

PARENT_SEPARATOR = "\n"  # between the parent's Flow ID and Step execution ID


def child_id(flow: Flow, step: StepExec, index: int) -> str:
    """The ID Dex generates for one SubFlow condition of a Step execution."""
    return f"SubFlow:{flow.flow_id}-{step.sid}-{index}"


def parent_link(flow: Flow, step: StepExec) -> str:
    """What a child records as its parent: the Flow ID and the waiting Step execution."""
    return f"{flow.flow_id}{PARENT_SEPARATOR}{step.sid}"


def closed_children(engine: EngineState, flow: Flow, step: StepExec) -> frozenset[int]:
    """Indexes of the Step's SubFlow conditions whose child Flow is closed."""
    assert step.condition is not None
    closed: set[int] = set()
    for index in range(len(step.condition.sub_flow_conditions)):
        child = engine.flows.get(child_id(flow, step, index))
        if child is not None and not child.running:
            closed.add(index)
    return frozenset(closed)


def results(engine: EngineState, flow: Flow, step: StepExec) -> list[pb.FlowResult]:
    """Every child's result in condition order: terminal, or a RUNNING snapshot."""
    assert step.condition is not None
    found: list[pb.FlowResult] = []
    for index in range(len(step.condition.sub_flow_conditions)):
        child = engine.flows.get(child_id(flow, step, index))
        if child is None or child.running:
            found.append(pb.FlowResult(flow_status=pb.FLOW_STATUS_RUNNING))
        else:
            found.append(flow_result(child))
    return found
