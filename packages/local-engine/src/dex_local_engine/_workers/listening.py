"""Listening Workers: the engine calls ``WorkerService`` at a Flow's Worker address.

Each task is one call (unary for an RPC, a server stream of frames for a Step
method). Frames go to the dispatcher's delivery function as if a pull stream had
sent them; a Worker error packed into the call's status becomes a ``worker_error``
frame, and a call that fails otherwise loses the task (reached the Worker unless it
was unavailable).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from grpc_status import rpc_status

from dex_local_engine._machine.work import Task


class ListeningWorkers:
    """Calls listening Workers, one channel per address; used from the engine's loop."""

    def __init__(self, deliver: Callable[[Task, pb.PollWorkerTaskFrame], None]) -> None:
        self._deliver = deliver
        self._channels: dict[str, Any] = {}

    def call(self, task: Task) -> asyncio.Task[None]:
        """Start the call that runs ``task`` on the Worker at its push address."""
        return asyncio.get_running_loop().create_task(self._run(task))

    async def close(self) -> None:
        """Close every channel."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    def _stub(self, address: str) -> Any:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = cast(Any, grpc).aio.insecure_channel(address)
        return cast(Any, pb_grpc).WorkerServiceStub(channel)

    async def _run(self, task: Task) -> None:
        assert task.push_address is not None
        stub = self._stub(task.push_address)
        task.started = True
        task.on_assigned(task)
        timeout = None if task.deadline is None else max(0.1, task.deadline - time.time() + 5)
        try:
            if isinstance(task.payload, pb.InvokeWorkerRPCRequest):
                response = await stub.InvokeWorkerRPC(task.payload, timeout=timeout)
                self._deliver(task, pb.PollWorkerTaskFrame(task_id=task.task_id, rpc=response))
                return
            if isinstance(task.payload, pb.InvokeWaitForMethodRequest):
                call = stub.InvokeWaitForMethod(task.payload, timeout=timeout)
                async for output in call:
                    self._deliver(
                        task, pb.PollWorkerTaskFrame(task_id=task.task_id, wait_for=output)
                    )
            else:
                call = stub.InvokeExecuteMethod(task.payload, timeout=timeout)
                async for output in call:
                    self._deliver(
                        task, pb.PollWorkerTaskFrame(task_id=task.task_id, execute=output)
                    )
            if not task.done:
                task.done = True
                task.on_lost(task, True, "the Worker ended the call without a result")
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if task.done:
                return
            worker_error = worker_error_of(error)
            if worker_error is not None:
                self._deliver(
                    task, pb.PollWorkerTaskFrame(task_id=task.task_id, worker_error=worker_error)
                )
                return
            code = getattr(error, "code", lambda: None)()
            task.done = True
            reached = task.frames > 0 or code != grpc.StatusCode.UNAVAILABLE
            task.on_lost(
                task, reached, f"calling the Worker at {task.push_address} failed: {error}"
            )


def worker_error_of(error: BaseException) -> pb.WorkerErrorResponse | None:
    """The WorkerErrorResponse a listening Worker packed into its error status, if any."""
    try:
        status = cast(Any, rpc_status).from_call(error)
    except Exception:
        return None
    if status is None:
        return None
    for packed in status.details:
        candidate = pb.WorkerErrorResponse()
        if packed.Is(candidate.DESCRIPTOR):
            packed.Unpack(candidate)
            return candidate
    return None
