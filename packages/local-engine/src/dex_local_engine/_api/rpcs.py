"""InvokeRPC: lock, call the Worker, apply the result's effects in one transaction.

The call itself is asynchronous (it waits for the Flow's ASYNC methods and for the
Worker); the result then commits through the machine (``_machine.rpc_results``).
"""

from __future__ import annotations

import asyncio
import time

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import locks, rpc_results, steps
from dex_local_engine._machine.engine import Engine
from dex_local_engine._machine.state import load_closed_attributes
from dex_local_engine._machine.work import Task
from dex_local_engine._rules import errors, worker_requests
from dex_local_engine._rules.constants import (
    DEFAULT_RPC_TIMEOUT_SECONDS,
    LOCAL_METHOD_WINDOW_SECONDS,
)
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.model import METHOD_PHASES, Flow
from dex_local_engine._rules.validation import validate_step_options
from dex_local_engine._rules.values import null, uuid7


async def invoke_rpc(engine: Engine, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
    """Run an RPC handler on a Worker and apply its effects in one transaction.

    As on Dex Server, an RPC first waits for the ASYNC Step methods its Flow is running
    (Dex runs them inside the workflow task its RPC query waits for), so it sees their
    writes. An RPC without locks works on a closed Flow too, as long as it only reads:
    Dex reads state through a query and signals the Flow only to apply writes.
    """
    flow = engine.flow(request.flow_id, active=False)
    if not request.rpc_name:
        raise errors.invalid("InvokeRPC needs an rpc_name")
    keys = sorted(set(request.lock_attribute_keys))
    await _settle_async_methods(engine, flow)
    flow = engine.flow(request.flow_id, active=False)  # a new start may have replaced the run
    if not flow.running and keys:
        raise errors.flow_not_found(flow.flow_id, active=True)  # locking RPCs update the run
    if not flow.running:
        load_closed_attributes(engine, flow)
    was_running = flow.running
    holder = f"rpc:{uuid7()}"
    if not locks.acquire(engine, flow, holder, keys):
        raise DexError(
            grpc.StatusCode.ABORTED,
            pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
            f"RPC {request.rpc_name!r} could not lock Attributes {keys}: another Step or "
            "RPC holds a lock",
        )
    try:
        rpc_request = worker_requests.rpc_request(flow, request)
        frame = await _call_rpc(engine, flow, rpc_request, request.timeout_seconds)
        if frame.WhichOneof("output") == "worker_error":
            error = frame.worker_error
            raise DexError(
                grpc.StatusCode.FAILED_PRECONDITION,
                pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                f"RPC {request.rpc_name!r} failed: {error.detail}",
                worker_error=error,
            )
        response = frame.rpc
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
            or response.record_events
        )
        if not has_effects:  # a pure query: nothing to commit
            output = response.output if response.HasField("output") else null()
            return pb.InvokeRPCResponse(output=output)
        if not was_running:
            raise errors.flow_not_found(flow.flow_id, active=True)
        if not flow.running or engine.flows.get(flow.flow_id) is not flow:
            raise DexError(
                grpc.StatusCode.FAILED_PRECONDITION,
                pb.ERROR_SUB_STATUS_FLOW_CLOSING,
                f"Flow {flow.flow_id!r} closed while RPC {request.rpc_name!r} ran",
            )
        rpc_results.apply_result(
            engine,
            flow,
            request,
            rpc_request,
            response,
            holder,
            strict=request.is_transactional or bool(keys),
        )
        output = response.output if response.HasField("output") else null()
        return pb.InvokeRPCResponse(output=output)
    finally:
        rpc_results.release_locks(engine, flow, holder)


async def _settle_async_methods(engine: Engine, flow: Flow) -> None:
    """Wait until no ASYNC Step method of the Flow is in flight.

    Dex Server runs ASYNC methods as local activities inside the workflow task, for
    at most ``LOCAL_METHOD_WINDOW_SECONDS`` from a method's first attempt; a query
    (the first part of an RPC) waits for that task. Past the window Dex hands the
    method to a regular activity and the task ends, so the wait never exceeds it.
    """
    while flow.running and engine.flows.get(flow.flow_id) is flow:
        now = time.time()
        until = 0.0
        for step in flow.steps.values():
            if step.phase not in METHOD_PHASES or not steps.is_async(flow, step):
                continue
            ends = step.method.first_attempt_at + LOCAL_METHOD_WINDOW_SECONDS
            if ends > now:
                until = max(until, ends)
        if not until:
            return
        await engine.wait_change(flow.flow_id, until - now)


async def _call_rpc(
    engine: Engine, flow: Flow, request: pb.InvokeWorkerRPCRequest, timeout_seconds: int
) -> pb.PollWorkerTaskFrame:
    loop = asyncio.get_running_loop()
    result: asyncio.Future[pb.PollWorkerTaskFrame] = loop.create_future()
    timeout = timeout_seconds if timeout_seconds > 0 else DEFAULT_RPC_TIMEOUT_SECONDS

    def on_frame(task: Task, frame: pb.PollWorkerTaskFrame) -> None:
        """The RPC's result (or Worker error) arrived."""
        if not result.done():
            result.set_result(frame)

    def on_lost(task: Task, started: bool, detail: str) -> None:
        """The Worker running the RPC went away."""
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
    engine.command("submit", task)
    try:
        async with asyncio.timeout(timeout):
            return await result
    except TimeoutError:
        raise DexError(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            pb.ERROR_SUB_STATUS_REQUEST_TIMEOUT,
            f"RPC {request.rpc_name!r} did not finish within {timeout} seconds",
        ) from None
    finally:
        engine.command("cancel", task)
