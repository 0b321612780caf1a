"""Handing tasks to Workers: pull streams (WorkerTaskService) and listening Workers.

Pull Workers open bidirectional ``PollWorkerTask`` streams, one per queue, and each
stream runs at most one task at a time. A task for Flow type T goes to the idle
stream of queue T that has been idle the longest: the stream that just finished a
task is the one most likely to retire next, so it is picked last.

A stream that ends while it holds a task is either a Worker that died (the task ran,
so the attempt fails) or a Worker that retired the stream cleanly before it started
the task (the task is handed out again for free). On localhost a dead peer cancels
the call within a moment, while a clean half-close keeps the call open until the
engine ends it, so the engine waits briefly, pings, and looks.

Listening Workers are called through ``WorkerService`` at the Flow's Worker address
(``listening``).

The machine never calls the dispatcher: its transitions queue ``WorkerCommand``s
(submit, cancel, abandon), which the dispatcher runs (:meth:`Dispatcher.apply`) when
the transition's block ends, before the commit. The dispatcher calls the machine
back through each task's callbacks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp

from dex_local_engine._machine.work import Task, WorkerCommand
from dex_local_engine._rules.limits import (
    DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER,
    DEFAULT_MAX_VALUE_BYTES,
    SDK_MAX_RECEIVE_BYTES,
    VALUE_TOO_LARGE_ERROR_TYPE,
    MalformedRequest,
    oversized_value,
    task_too_large,
    value_too_large,
)
from dex_local_engine._workers.listening import ListeningWorkers

_LOG = logging.getLogger("dex_local_engine.dispatch")

LIVENESS_CHECK_SECONDS = 0.03  # after this, a Worker whose other streams are open is alive
# When the Worker's other streams are open, a death still cancels this call at once: this
# grace (not the full liveness check) is enough, so a retired stream costs a task 2 ms.
RETIRE_GRACE_SECONDS = 0.002
REJECT_EXCLUSION_SECONDS = 0.25  # a stream that rejected a task gets no task for this long
# A stream that just finished a task often retires at once; with a backlog it waits this
# long before its next task, so the task is not sent into a half-closing stream.
SETTLE_SECONDS = 0.004
UNKNOWN_NAME_EXCLUSION_SECONDS = 2.0
# The task frame around a payload: task ID, deadline and field tags stay well below this.
TASK_FRAME_OVERHEAD_BYTES = 256

_EOF: Any = cast(Any, grpc).aio.EOF


@dataclass(eq=False)
class WorkerStream:
    """One pull stream of a Worker: its queue, identity and the task it runs."""

    queue: str
    app_worker_id: str
    flow_types: tuple[str, ...]
    peer: str = ""
    out: asyncio.Queue[pb.PollWorkerTaskResponse] = field(default_factory=lambda: asyncio.Queue())
    task: Task | None = None
    closing: bool = False
    excluded_until: float = 0.0

    def send(self, frame: pb.PollWorkerTaskResponse) -> None:
        """Queue a frame for the stream's writer."""
        self.out.put_nowait(frame)


def _deadline_stamp(deadline: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(deadline * 1e9))
    return stamp


class Dispatcher:
    """Routes tasks to Worker streams; used only from the engine's event loop."""

    def __init__(self) -> None:
        self.max_task_bytes = SDK_MAX_RECEIVE_BYTES
        self.max_value_bytes = DEFAULT_MAX_VALUE_BYTES
        self.max_streams_per_worker = DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER
        self._pending: dict[str, deque[Task]] = {}
        self._idle: dict[str, dict[WorkerStream, None]] = {}
        self._streams: set[WorkerStream] = set()
        self._listening = ListeningWorkers(self._deliver)
        self._pump_scheduled: dict[str, float] = {}
        # Wraps the frames a Worker stream already has waiting (the engine sets its
        # transaction here), so a Step's Stream writes and its result commit once.
        self.frame_batch: Callable[[], AbstractContextManager[None]] = nullcontext

    # Tasks ------------------------------------------------------------------------

    def apply(self, command: WorkerCommand) -> None:
        """Run a command a transition queued (see ``dex_local_engine._machine.work``)."""
        if command.action == "submit":
            self.submit(command.task)
        elif command.action == "cancel":
            self.cancel(command.task)
        else:
            self.abandon(command.task)

    def submit(self, task: Task) -> None:
        """Hand a task to a Worker now, or queue it until one is free."""
        size = task.payload.ByteSize() + TASK_FRAME_OVERHEAD_BYTES
        if size > self.max_task_bytes:
            # Sent anyway, the Worker would drop the stream and the task would come back
            # forever, starving the Worker's other sessions; it fails here instead.
            task.done = True
            task.undeliverable = True
            detail = task_too_large(_task_name(task), size, self.max_task_bytes)
            _LOG.warning("flow %s: %s", task.flow_id, detail)
            # Later, so the caller finishes its own change of the Flow first.
            asyncio.get_running_loop().call_soon(task.on_lost, task, False, detail)
            return
        if task.push_address is not None:
            task.push_call = self._listening.call(task)
            return
        if not self._try_assign(task):
            self._pending.setdefault(task.flow_type, deque()).append(task)

    def cancel(self, task: Task) -> None:
        """Stop waiting for a task; a running one is told to stop."""
        if task.done:
            return
        task.done = True
        if task.push_call is not None:
            task.push_call.cancel()
        elif task.stream is not None:
            task.stream.send(
                pb.PollWorkerTaskResponse(
                    cancel_task=pb.PollWorkerTaskCancelTask(task_id=task.task_id)
                )
            )
        else:
            pending = self._pending.get(task.flow_type)
            if pending is not None and task in pending:
                pending.remove(task)

    def abandon(self, task: Task) -> None:
        """Stop waiting for a task without interrupting it: a running one runs to its end
        on the Worker and its result is dropped."""
        if task.done:
            return
        task.done = True
        if task.stream is None and task.push_call is None:
            pending = self._pending.get(task.flow_type)
            if pending is not None and task in pending:
                pending.remove(task)

    def _try_assign(self, task: Task) -> bool:
        idle = self._idle.get(task.flow_type)
        if not idle:
            return False
        now = time.monotonic()
        for stream in idle:
            if stream.excluded_until <= now:
                del idle[stream]
                self._assign(stream, task)
                return True
        self._schedule_pump(task.flow_type)
        return False

    def _assign(self, stream: WorkerStream, task: Task) -> None:
        stream.task = task
        task.stream = stream
        task.started = True
        task.frames = 0
        stream.send(_task_frame(task))
        task.on_assigned(task)

    def _requeue(self, task: Task) -> None:
        task.stream = None
        task.started = False
        if task.done:
            return
        if not self._try_assign(task):
            self._pending.setdefault(task.flow_type, deque()).appendleft(task)

    def _stream_idle(self, stream: WorkerStream) -> None:
        stream.task = None
        if stream.closing:
            return
        pending = self._pending.get(stream.queue)
        if pending and stream.excluded_until <= time.monotonic():
            while pending:
                task = pending.popleft()
                if not task.done:
                    self._assign(stream, task)
                    return
        self._idle.setdefault(stream.queue, {})[stream] = None
        if pending:
            self._schedule_pump(stream.queue)

    def _schedule_pump(self, queue: str) -> None:
        """Run _pump when the first excluded idle stream of the queue is usable again."""
        idle = self._idle.get(queue) or {}
        now = time.monotonic()
        waits = [s.excluded_until - now for s in idle if s.excluded_until > now]
        delay = max(0.0, min(waits)) if waits else REJECT_EXCLUSION_SECONDS
        due = now + delay
        scheduled = self._pump_scheduled.get(queue)
        if scheduled is not None and scheduled <= due:
            return
        self._pump_scheduled[queue] = due
        asyncio.get_running_loop().call_later(delay, self._pump, queue, due)

    def _pump(self, queue: str, due: float) -> None:
        if self._pump_scheduled.get(queue) == due:
            del self._pump_scheduled[queue]
        pending = self._pending.get(queue)
        while pending:
            task = pending[0]
            if task.done:
                pending.popleft()
                continue
            idle = self._idle.get(queue)
            now = time.monotonic()
            ready = [s for s in (idle or {}) if s.excluded_until <= now]
            if not ready:
                if idle:
                    self._schedule_pump(queue)
                return
            pending.popleft()
            assert idle is not None
            del idle[ready[0]]
            self._assign(ready[0], task)

    # Pull streams -----------------------------------------------------------------

    async def serve_stream(self, context: Any) -> None:
        """Serve one PollWorkerTask stream from registration to its end."""
        first = await _read_frame(context)
        if first is None:
            return
        if first.WhichOneof("frame") != "register":
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "the first frame must register"
            )
        register = first.register
        open_streams = sum(1 for s in self._streams if s.app_worker_id == register.app_worker_id)
        if open_streams >= self.max_streams_per_worker:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Worker {register.app_worker_id!r} already has {open_streams} open task "
                f"streams, the engine's max_concurrent_streams_per_worker",
            )
        stream = WorkerStream(
            queue=register.queue,
            app_worker_id=register.app_worker_id,
            flow_types=tuple(register.flow_types),
            peer=str(context.peer()),
        )
        await context.write(
            pb.PollWorkerTaskResponse(
                registered=pb.PollWorkerTaskRegistered(supports_unknown_name_rejection=True)
            )
        )
        writer = asyncio.get_running_loop().create_task(self._write_loop(stream, context))
        self._streams.add(stream)
        self._stream_idle(stream)
        died = True
        try:
            while True:
                request = await _read_frame(context)
                if request is None:
                    break
                # Frames already sent are read without suspending, so nothing else runs
                # between them: one commit for them all (a Step's Stream writes and its
                # result) changes no one's view of the engine.
                batch = [request]
                malformed: MalformedRequest | None = None
                for _ in range(_frames_waiting(context)):
                    frame = await context.read()
                    if frame is _EOF:
                        break
                    if isinstance(frame, MalformedRequest):
                        malformed = frame
                        break
                    batch.append(cast(pb.PollWorkerTaskRequest, frame))
                with self.frame_batch() if len(batch) > 1 else nullcontext():
                    for request in batch:
                        self._on_request(stream, request)
                if malformed is not None:
                    await _abort_malformed(context, malformed)
            self._close_stream(stream)
            task = stream.task
            if task is None or task.done:
                died = False
            elif task.frames == 0:
                # A stream that ends before any output either retired cleanly (the task
                # never ran: hand it out again for free) or belongs to a Worker that died
                # (its output may have died with it). A dead Worker ends all its streams at
                # once (and this call is cancelled within a loop iteration or two), while a
                # retiring one keeps the others, such as its sticky stream. With those open a
                # short grace tells the two apart; without them the engine waits longer.
                alive = self._worker_alive(stream) and not context.cancelled()
                await asyncio.sleep(RETIRE_GRACE_SECONDS if alive else LIVENESS_CHECK_SECONDS)
                died = bool(context.cancelled()) or not self._worker_alive(stream)
        finally:
            self._close_stream(stream)
            writer.cancel()
            task = stream.task
            stream.task = None
            if task is not None and not task.done:
                if died:
                    task.done = True
                    task.on_lost(task, True, "the Worker stream ended while it ran the task")
                else:
                    self._requeue(task)

    def _worker_alive(self, stream: WorkerStream) -> bool:
        return any(
            other is not stream
            and other.app_worker_id == stream.app_worker_id
            and not other.closing
            for other in self._streams
        )

    def _close_stream(self, stream: WorkerStream) -> None:
        stream.closing = True
        self._streams.discard(stream)
        idle = self._idle.get(stream.queue)
        if idle is not None:
            idle.pop(stream, None)

    async def _write_loop(self, stream: WorkerStream, context: Any) -> None:
        try:
            while True:
                frame = await stream.out.get()
                await context.write(frame)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the call ended; the reader side notices it too
            _LOG.debug("Worker stream write failed: %s", error)

    def _on_request(self, stream: WorkerStream, request: pb.PollWorkerTaskRequest) -> None:
        kind = request.WhichOneof("frame")
        if kind == "task_frame":
            frame = request.task_frame
            task = stream.task
            if task is None or frame.task_id != task.task_id:
                return
            task.frames += 1
            final = _is_final(frame)
            if final:
                frame = self._refuse_oversized(task, frame)
            if not task.done:
                if final:
                    task.done = True
                task.on_frame(task, frame)
            if final:
                pending = self._pending.get(stream.queue)
                if pending:
                    stream.excluded_until = time.monotonic() + SETTLE_SECONDS
                self._stream_idle(stream)
        elif kind == "reject":
            task = stream.task
            if task is None or request.reject.task_id != task.task_id:
                return
            unknown = request.reject.reason in (
                pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP,
                pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_RPC,
            )
            exclusion = UNKNOWN_NAME_EXCLUSION_SECONDS if unknown else REJECT_EXCLUSION_SECONDS
            stream.excluded_until = time.monotonic() + exclusion
            stream.task = None
            if unknown:
                task.unknown_to.add(stream.app_worker_id)
                if not any(
                    other.queue == task.flow_type and other.app_worker_id not in task.unknown_to
                    for other in self._streams
                ):
                    # No connected Worker knows the name: the attempt fails without running.
                    task.done = True
                    task.stream = None
                    task.started = False
                    self._stream_idle(stream)
                    task.on_lost(task, False, f"no connected Worker knows {_task_name(task)}")
                    return
            self._requeue(task)
            self._stream_idle(stream)

    def _deliver(self, task: Task, frame: pb.PollWorkerTaskFrame) -> None:
        if task.done:
            return
        task.frames += 1
        if _is_final(frame):
            task.done = True
            frame = self._refuse_oversized(task, frame)
        task.on_frame(task, frame)

    def _refuse_oversized(
        self, task: Task, frame: pb.PollWorkerTaskFrame
    ) -> pb.PollWorkerTaskFrame:
        """The result, or a Worker error in its place when it writes a value over the limit."""
        if frame.ByteSize() <= self.max_value_bytes:
            return frame
        checked = frame
        if frame.WhichOneof("output") == "rpc" and frame.rpc.HasField("output"):
            # An RPC's answer goes back to its caller, not into the Flow's state.
            checked = pb.PollWorkerTaskFrame()
            checked.CopyFrom(frame)
            checked.rpc.ClearField("output")
        found = oversized_value(checked, self.max_value_bytes)
        if found is None:
            return frame
        path, size = found
        detail = value_too_large(
            f"the result of {_task_name(task)}", path, size, self.max_value_bytes
        )
        _LOG.warning("flow %s: %s", task.flow_id, detail)
        return pb.PollWorkerTaskFrame(
            task_id=frame.task_id,
            worker_error=pb.WorkerErrorResponse(
                detail=detail,
                error_type=VALUE_TOO_LARGE_ERROR_TYPE,
                grpc_status=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
            ),
        )

    def ask_to_reconnect(self, reason: str) -> None:
        """Tell every pull stream to drain and reconnect (the engine is stopping)."""
        for stream in list(self._streams):
            stream.send(
                pb.PollWorkerTaskResponse(reconnect=pb.PollWorkerTaskReconnect(reason=reason))
            )

    async def close(self) -> None:
        """Stop dispatching and end every stream."""
        await self._listening.close()


def _frames_waiting(context: Any) -> int:
    """Frames the stream's client already sent (the in-process transport counts them;
    over gRPC the reader cannot look ahead, so each frame commits on its own)."""
    requests_ready = getattr(context, "requests_ready", None)
    return requests_ready() if requests_ready is not None else 0


async def _read_frame(context: Any) -> pb.PollWorkerTaskRequest | None:
    """The next frame, ``None`` at the end; a malformed one ends the stream, clearly."""
    frame = await context.read()
    if frame is _EOF:
        return None
    if isinstance(frame, MalformedRequest):
        await _abort_malformed(context, frame)
    return cast(pb.PollWorkerTaskRequest, frame)


async def _abort_malformed(context: Any, frame: MalformedRequest) -> NoReturn:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, frame.describe("PollWorkerTask"))
    raise AssertionError("abort returned")  # pragma: no cover


def _task_frame(task: Task) -> pb.PollWorkerTaskResponse:
    # Built in place: passing a finished PollWorkerTask to the response's constructor
    # copies the whole task again, slowly, which costs tens of ms for a large one.
    response = pb.PollWorkerTaskResponse()
    frame = response.task
    frame.task_id = task.task_id
    if task.deadline is not None:
        frame.deadline.CopyFrom(_deadline_stamp(task.deadline))
    if isinstance(task.payload, pb.InvokeWaitForMethodRequest):
        frame.wait_for.CopyFrom(task.payload)
    elif isinstance(task.payload, pb.InvokeExecuteMethodRequest):
        frame.execute.CopyFrom(task.payload)
    else:
        frame.rpc.CopyFrom(task.payload)
    return response


def _is_final(frame: pb.PollWorkerTaskFrame) -> bool:
    """Whether the frame ends its task: a result or a Worker error."""
    inner = frame.WhichOneof("output")
    if inner == "wait_for":
        return frame.wait_for.WhichOneof("output") == "result"
    if inner == "execute":
        return frame.execute.WhichOneof("output") == "result"
    return inner in ("rpc", "worker_error")


def _task_name(task: Task) -> str:
    payload = task.payload
    if isinstance(payload, pb.InvokeWorkerRPCRequest):
        return f"RPC {payload.rpc_name!r} of Flow type {task.flow_type!r}"
    return f"Step {payload.step_type!r} of Flow type {task.flow_type!r}"
