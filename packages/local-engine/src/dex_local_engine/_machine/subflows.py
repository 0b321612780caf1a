"""SubFlows: child Flows a Step's wait_for starts and waits for.

A SubFlow condition names a Flow type, its start Step and input, and SubFlowOptions
(timeout, initial Attributes, config, reuse policy). When the Step starts waiting,
each condition's child starts under a deterministic ID,
``SubFlow:<parent Flow ID>-<Step execution ID>-<condition index>``, or an existing
Flow of that ID is reused as the reuse policy says:

================  ===========  ===================================  ===============
existing child    ATTACH       RESTART_IF_PREVIOUS_EXITS_ABNORMALLY  ALWAYS_RESTART
================  ===========  ===================================  ===============
none              start        start                                start
running           attach       attach                               terminate, start
completed         its result   its result                           start
ended otherwise   its result   start                                start
================  ===========  ===================================  ===============

A start with the same request ID (the same parent run, Step execution and index)
always attaches, so repeating it is safe. The child records its parent (Flow ID and
Step execution) and its request ID names the parent run; when it closes, the
parent's waiting Step re-evaluates its condition. A child outlives its parent's
wait: an ANY condition may finish while a child runs, and the parent closing does
not stop its children (stop one with StopFlow and its ID).
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import flows
from dex_local_engine._machine.children import child_id, parent_link
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.model import Flow, StepExec


def start_children(engine: EngineState, flow: Flow, step: StepExec) -> None:
    """Start or reuse the child of every SubFlow condition of a Step that now waits."""
    assert step.condition is not None
    for index, condition in enumerate(step.condition.sub_flow_conditions):
        flow_id = child_id(flow, step, index)
        request_id = f"subflow:{flow.run_id}:{step.sid}:{index}"
        existing = engine.flows.get(flow_id)
        if existing is None or _restart(existing, request_id, condition.options.reuse_policy):
            if existing is not None:
                existing.parent = ""  # the old run no longer answers this wait
            flows.start_flow(
                engine,
                _start_request(flow, condition, flow_id, request_id),
                parent=parent_link(flow, step),
            )
        else:
            existing.parent = parent_link(flow, step)
            engine.touch(existing)


def _restart(existing: Flow, request_id: str, policy: int) -> bool:
    if existing.request_id == request_id:
        return False  # the same start again: attach
    if policy == pb.SUB_FLOW_REUSE_POLICY_ALWAYS_RESTART:
        return True
    if existing.running or existing.status == pb.FLOW_STATUS_COMPLETED:
        return False
    return policy != pb.SUB_FLOW_REUSE_POLICY_ATTACH


def _start_request(
    parent: Flow, condition: pb.SubFlowCondition, flow_id: str, request_id: str
) -> pb.StartFlowRequest:
    options = condition.options
    config = pb.FlowConfig()
    if options.HasField("flow_config_override"):
        config.CopyFrom(options.flow_config_override)
    if not config.HasField("worker_target"):
        config.worker_target.CopyFrom(parent.config.worker_target)  # same Workers as the parent
    start = pb.FlowStartOptions(
        # Only a restart reaches an existing ID here; a running one is terminated.
        id_reuse_policy=pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING,
        flow_start_delay_seconds=options.flow_start_delay_seconds,
        attributes=options.attributes,
        flow_config_override=config,
    )
    if options.HasField("timeout_handler_options"):
        start.timeout_handler_options.CopyFrom(options.timeout_handler_options)
    request = pb.StartFlowRequest(
        flow_id=flow_id,
        flow_type=condition.sub_flow_type,
        start_step_type=condition.start_step_type,
        step_options=condition.step_options,
        flow_timeout_seconds=options.flow_timeout_seconds,
        flow_timeout_policy=options.flow_timeout_policy,
        flow_start_options=start,
        request_id=request_id,
    )
    if condition.HasField("step_input"):
        request.step_input.CopyFrom(condition.step_input)
    return request
