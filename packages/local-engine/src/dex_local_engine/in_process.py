"""A direct channel from the Dex SDK to an engine served in this same process.

When the SDK's ``AsyncClient`` and ``AsyncWorker`` share a process (and usually an
event loop) with an ``EngineServer``, loopback gRPC costs a fifth of a session
turn's CPU: gRPC's poller thread, its asyncio callbacks, call set-up and stream
writes, for about 9 unary calls and 8 Worker tasks per turn. ``InProcessChannel``
carries the same calls without sockets: it implements the part of
``grpc.aio.Channel`` the SDK uses and hands each call to the engine's own method
handlers, through the same server interceptors (authentication, request checks).

It stays faithful to gRPC where the SDK or the engine can tell the difference:

* requests and responses cross as bytes, through the registered serializers, so
  no message object is shared;
* the engine's ``max_request_bytes`` and ``max_task_bytes`` and the SDK's 4 MiB
  receive limit refuse oversized messages with RESOURCE_EXHAUSTED;
* an abort reaches the caller as ``grpc.aio.AioRpcError`` with the code, details
  and trailing metadata (``grpc-status-details-bin``), an unexpected handler
  error as UNKNOWN, an unknown method as UNIMPLEMENTED, ``timeout=`` as
  DEADLINE_EXCEEDED;
* each call's handler runs in its own task with an empty ``contextvars.Context``;
  cancelling the call (or closing the channel) cancels that task and makes
  ``context.cancelled()`` true;
* a call from another thread or event loop runs on the engine's loop.

:class:`InProcessServer` holds one engine's handlers; ``EngineServer(in_process=True)``
registers it under its address, and ``dex_local_engine.sdk_patches.
route_in_process_channels()`` makes the SDK's async channels to that exact address
in-process ones. Every other address keeps a real gRPC channel.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import grpc

__all__ = [
    "InProcessChannel",
    "InProcessServer",
    "collect_method_handlers",
    "register",
    "server_at",
    "unregister",
]

_LOG = logging.getLogger("dex_local_engine.in_process")
_T = TypeVar("_T")

CLIENT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024
"""gRPC's default receive limit, which the SDK's channels keep."""

_EOF: Any = vars(grpc.aio)["EOF"]  # not in the typing stubs
_PEER = "in-process"
_LOCALLY_CANCELLED = "Locally cancelled by application!"


class _CallDetails(NamedTuple):
    """What server interceptors see of a call (``grpc.HandlerCallDetails``)."""

    method: str
    invocation_metadata: tuple[tuple[str, str | bytes], ...]


class _Status(NamedTuple):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()

    def error(self) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(
            self.code,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(*self.trailing_metadata),
            self.details,
            None,
        )


_OK = _Status(grpc.StatusCode.OK, "")


class _HandlerRecorder:
    """Stands in for a gRPC server while ``add_*Servicer_to_server`` registers handlers."""

    def __init__(self) -> None:
        self.generic_handlers: list[Any] = []

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        self.generic_handlers.extend(generic_rpc_handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        del service, handlers  # the same handlers as the generic ones


def collect_method_handlers(
    adders: Iterable[tuple[Callable[[Any, Any], None], Any]],
) -> list[Any]:
    """The generic handlers ``add_XServicer_to_server(servicer, server)`` would register."""
    recorder = _HandlerRecorder()
    for add, servicer in adders:
        add(servicer, recorder)
    return recorder.generic_handlers


class _Pipe:
    """Messages one way within a call, on the engine's loop: bytes, then one end mark."""

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    async def get(self) -> Any:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()


_END = object()  # the end of a direction of a call


class _ServerCall:
    """One call's server side: its servicer context and state, on the engine's loop."""

    def __init__(
        self,
        server: InProcessServer,
        method: str,
        metadata: tuple[tuple[str, str | bytes], ...],
        timeout: float | None,
    ) -> None:
        self.server = server
        self.method = method
        self.metadata = metadata
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.requests = _Pipe()
        self.responses = _Pipe()
        self.status: _Status | None = None
        self.task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._deadline_handle: asyncio.TimerHandle | None = None
        self.request_deserializer: Any = None
        self.response_serializer: Any = None
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: tuple[tuple[str, str | bytes], ...] = ()
        self._done_callbacks: list[Callable[[Any], None]] = []

    def finish(self, status: _Status) -> None:
        """End the call with ``status`` once; the client reads it after the responses."""
        if self.status is not None:
            return
        self.status = status
        self.responses.put(_END)
        self.requests.put(_END)  # the handler's next read sees the end
        self.server.active.discard(self)
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
        for callback in self._done_callbacks:
            try:
                callback(self)
            except Exception:
                _LOG.exception("a servicer context done callback failed")

    def cancel(self, status: _Status) -> None:
        """The call ends early (client cancel, deadline, size limit, stop): stop the handler."""
        if self.status is not None:
            return
        self._cancelled = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.finish(status)

    def start_deadline(self, task: asyncio.Task[Any] | None) -> None:
        """Run as ``task``, and end with DEADLINE_EXCEEDED once the deadline passes."""
        self.task = task
        if self.deadline is not None and self.status is None:
            self._deadline_handle = self.server.loop.call_at(
                self.server.loop.time() + max(0.0, self.deadline - time.monotonic()),
                self.cancel,
                _Status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
            )

    def end_status(self) -> _Status:
        if self._code is None or self._code is grpc.StatusCode.OK:
            return _OK
        return _Status(self._code, self._details, self._trailing)

    # --- grpc.aio.ServicerContext ---------------------------------------------------

    async def read(self) -> Any:
        item = await self.requests.get()
        if item is _END:
            self.requests.put(_END)  # later reads see the end again
            return _EOF
        return _decode(item, self.request_deserializer)

    async def write(self, message: Any) -> None:
        if self.status is not None:
            raise asyncio.InvalidStateError("RPC already finished.")
        data = _encode(message, self.response_serializer)
        refused = _refused_response(len(data), self.server.max_send_bytes)
        if refused is not None:
            self.cancel(refused)  # as gRPC's transport ends the call; the handler stops
            return
        self.responses.put(data)

    async def send_initial_metadata(self, initial_metadata: Any) -> None:
        del initial_metadata

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()
    ) -> Any:
        if code is grpc.StatusCode.OK:
            _LOG.error("abort() called with StatusCode.OK; returning UNKNOWN")
            code, details = grpc.StatusCode.UNKNOWN, ""
        self._code = code
        self._details = details
        self._trailing = _metadata_tuple(trailing_metadata) or self._trailing
        raise grpc.aio.AbortError()

    async def abort_with_status(self, status: Any) -> Any:
        await self.abort(status.code, status.details, status.trailing_metadata)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        self._trailing = _metadata_tuple(trailing_metadata)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._trailing

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self.metadata

    def peer(self) -> str:
        return _PEER

    def peer_identities(self) -> None:
        return None

    def peer_identity_key(self) -> None:
        return None

    def auth_context(self) -> dict[str, Any]:
        return {}

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def cancelled(self) -> bool:
        # A cancel of the handler's task is the call's cancel: true while it unwinds, too.
        task = self.task
        return self._cancelled or (task is not None and not task.done() and task.cancelling() > 0)

    def done(self) -> bool:
        return self.status is not None

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self.status is not None:
            callback(self)
        else:
            self._done_callbacks.append(callback)

    def set_compression(self, compression: Any) -> None:
        del compression

    def disable_next_message_compression(self) -> None:
        return None


class InProcessServer:
    """One engine's method handlers, reached without a socket.

    ``generic_handlers`` are what the servicers register (see
    :func:`collect_method_handlers`); ``interceptors`` are the gRPC server's, applied
    in the same order to every call. The limits are the server's receive and send
    limits, as its ``grpc.max_receive_message_length`` / ``max_send_message_length``.
    """

    def __init__(
        self,
        generic_handlers: Sequence[Any],
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
        *,
        max_receive_bytes: int,
        max_send_bytes: int,
    ) -> None:
        self.generic_handlers = tuple(generic_handlers)
        self.interceptors = tuple(interceptors)
        self.max_receive_bytes = max_receive_bytes
        self.max_send_bytes = max_send_bytes
        self.loop = asyncio.get_running_loop()
        self.active: set[_ServerCall] = set()
        self.stopped = False

    async def stop(self, grace: float | None = None) -> None:
        """Refuse new calls; after ``grace`` seconds end the active ones (UNAVAILABLE)."""
        self.stopped = True
        if grace and self.active:
            tasks = [call.task for call in self.active if call.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=grace)
        for call in tuple(self.active):
            call.cancel(_Status(grpc.StatusCode.UNAVAILABLE, "the in-process engine stopped"))

    # --- calls, on the engine's loop ---------------------------------------------------

    async def _handler(self, call: _ServerCall) -> Any:
        details = _CallDetails(call.method, call.metadata)

        async def continue_with(index: int, call_details: Any) -> Any:
            if index == len(self.interceptors):
                for generic in self.generic_handlers:
                    handler = generic.service(call_details)
                    if handler is not None:
                        return handler
                return None
            return await self.interceptors[index].intercept_service(
                lambda next_details: continue_with(index + 1, next_details), call_details
            )

        handler = await continue_with(0, details)
        if handler is not None:
            call.request_deserializer = handler.request_deserializer
            call.response_serializer = handler.response_serializer
        return handler

    def open_call(
        self, method: str, metadata: tuple[tuple[str, str | bytes], ...], timeout: float | None
    ) -> _ServerCall:
        """A new call's server side; an already ended one when the server stopped."""
        call = _ServerCall(self, method, metadata, timeout)
        if self.stopped:
            call.finish(_Status(grpc.StatusCode.UNAVAILABLE, "the in-process engine stopped"))
        else:
            self.active.add(call)
        return call

    def start_unary(
        self,
        method: str,
        metadata: tuple[tuple[str, str | bytes], ...],
        timeout: float | None,
        request: bytes,
    ) -> asyncio.Task[bytes]:
        """Start a unary call in a task of its own, on this (the engine's) loop."""
        call = self.open_call(method, metadata, timeout)
        task = self.loop.create_task(self._unary(call, request), context=contextvars.Context())
        call.start_deadline(task)
        # A task cancelled before it ran still ends its call.
        task.add_done_callback(
            lambda _: call.cancel(_Status(grpc.StatusCode.CANCELLED, _LOCALLY_CANCELLED))
        )
        return task

    async def _unary(self, call: _ServerCall, request: bytes) -> bytes:
        response = b""
        try:
            if call.status is None:
                response = await self._serve_unary(call, request)
        except asyncio.CancelledError:
            if call.status is None:  # the client cancelled
                call.cancel(_Status(grpc.StatusCode.CANCELLED, _LOCALLY_CANCELLED))
                raise
            # Ended by the deadline or the server stopping: the client sees that status.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        status = _status(call)
        if status.code is not grpc.StatusCode.OK:
            raise status.error()
        return response

    async def _serve_unary(self, call: _ServerCall, request: bytes) -> bytes:
        if len(request) > self.max_receive_bytes:
            call.finish(_too_large("SERVER: Received", len(request), self.max_receive_bytes))
            return b""
        handler = await self._handler(call)
        if handler is None or handler.unary_unary is None:
            call.finish(_Status(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
            return b""
        try:
            result = handler.unary_unary(_decode(request, call.request_deserializer), call)
            if inspect.isawaitable(result):
                result = await result
        except grpc.aio.AbortError:
            call.finish(call.end_status())
            return b""
        except Exception as error:
            call.finish(_unexpected(error, call.method))
            return b""
        status = call.end_status()
        if status.code is not grpc.StatusCode.OK:
            call.finish(status)
            return b""
        data = _encode(result, call.response_serializer)
        call.finish(_refused_response(len(data), self.max_send_bytes) or status)
        return data

    def open_stream(
        self, method: str, metadata: tuple[tuple[str, str | bytes], ...], timeout: float | None
    ) -> _ServerCall:
        """Start a bidirectional stream call; its handler runs in a task of its own."""
        call = self.open_call(method, metadata, timeout)
        if call.status is None:
            call.start_deadline(
                self.loop.create_task(self._serve_stream(call), context=contextvars.Context())
            )
        return call

    async def _serve_stream(self, call: _ServerCall) -> None:
        try:
            await self._run_stream_handler(call)
        except asyncio.CancelledError:
            call.cancel(_Status(grpc.StatusCode.CANCELLED, "Cancelled"))

    async def _run_stream_handler(self, call: _ServerCall) -> None:
        handler = await self._handler(call)
        if handler is None or handler.stream_stream is None:
            call.finish(_Status(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
            return
        try:
            result = handler.stream_stream(_request_iterator(call), call)
            if inspect.isasyncgen(result):
                async for response in cast(AsyncIterator[Any], result):
                    await call.write(response)
            elif inspect.isawaitable(result):
                await result
        except grpc.aio.AbortError:
            call.finish(call.end_status())
        except Exception as error:
            call.finish(_unexpected(error, call.method))
        else:
            call.finish(call.end_status())

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run ``coroutine`` on the engine's loop from another thread, in an empty context."""
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def start() -> None:
            if not future.set_running_or_notify_cancel():
                coroutine.close()
                return
            task = self.loop.create_task(coroutine)

            def copy(done: asyncio.Task[_T]) -> None:
                if future.done():
                    return
                if done.cancelled():
                    future.cancel()
                elif done.exception() is not None:
                    future.set_exception(cast(BaseException, done.exception()))
                else:
                    future.set_result(done.result())

            task.add_done_callback(copy)
            future.add_done_callback(
                lambda f: self.loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None
            )

        if self.loop.is_closed() or not self.loop.is_running():
            coroutine.close()
            raise _Status(
                grpc.StatusCode.UNAVAILABLE, "the in-process engine's event loop is not running"
            ).error()
        self.loop.call_soon_threadsafe(start, context=contextvars.Context())
        return future


async def _request_iterator(call: _ServerCall) -> AsyncIterator[Any]:
    while True:
        message = await call.read()
        if message is _EOF:
            return
        yield message


def _status(call: _ServerCall) -> _Status:
    assert call.status is not None, "a served call always ends with a status"
    return call.status


def _unexpected(error: Exception, method: str) -> _Status:
    # As gRPC's asyncio server: logged, and UNKNOWN with the error's type and text.
    _LOG.exception("Unexpected [%s] raised by servicer method [%s]", type(error).__name__, method)
    return _Status(grpc.StatusCode.UNKNOWN, f"Unexpected {type(error)}: {error}")


def _refused_response(size: int, max_send_bytes: int) -> _Status | None:
    """The status a response of ``size`` bytes ends its call with, if gRPC refuses it:
    over the server's send limit, or over the SDK channel's receive limit."""
    if size > max_send_bytes:
        return _too_large("SERVER: Sent", size, max_send_bytes)
    if size > CLIENT_MAX_RECEIVE_BYTES:
        return _too_large("CLIENT: Received", size, CLIENT_MAX_RECEIVE_BYTES)
    return None


def _too_large(what: str, size: int, limit: int) -> _Status:
    return _Status(
        grpc.StatusCode.RESOURCE_EXHAUSTED, f"{what} message larger than max ({size} vs. {limit})"
    )


def _encode(message: Any, serializer: Any) -> bytes:
    return bytes(message) if serializer is None else cast(bytes, serializer(message))


def _decode(data: bytes, deserializer: Any) -> Any:
    return data if deserializer is None else deserializer(data)


def _metadata_tuple(metadata: Any) -> tuple[tuple[str, str | bytes], ...]:
    if not metadata:
        return ()
    return tuple((str(key), value) for key, value in metadata)


# --- the client side -----------------------------------------------------------------


def _on_loop_of(server: InProcessServer) -> bool:
    try:
        return asyncio.get_running_loop() is server.loop
    except RuntimeError:
        return False


async def _run_on(server: InProcessServer, coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a step of a call on the engine's loop: directly when already on it."""
    if _on_loop_of(server):
        return await coroutine
    return await asyncio.wrap_future(server.submit(coroutine))


class UnaryUnaryCall:
    """A unary call in flight: await it for the response (``grpc.aio.UnaryUnaryCall``)."""

    def __init__(self, channel: InProcessChannel, response: Awaitable[bytes], deserializer: Any):
        self._channel = channel
        self._deserializer = deserializer
        self._task: asyncio.Future[bytes] = asyncio.ensure_future(response)
        self._locally_cancelled = False
        channel.active.add(self)
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Future[bytes]) -> None:
        self._channel.active.discard(self)
        if not task.cancelled():
            task.exception()  # an error nobody awaits is not "never retrieved", as in gRPC

    def __await__(self) -> Any:
        try:
            data = yield from self._task.__await__()
        except asyncio.CancelledError:
            self.cancel()
            raise
        return _decode(data, self._deserializer)

    def cancel(self) -> bool:
        if self._task.done():
            return False
        self._locally_cancelled = True
        self._task.cancel()
        return True

    def cancelled(self) -> bool:
        return self._locally_cancelled

    def done(self) -> bool:
        return self._task.done()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._task.add_done_callback(lambda _: callback(self))

    def time_remaining(self) -> float | None:
        return None

    async def code(self) -> grpc.StatusCode:
        error = await self._outcome()
        return grpc.StatusCode.OK if error is None else error.code()

    async def details(self) -> str:
        error = await self._outcome()
        return "" if error is None else str(error.details())

    async def initial_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata()

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        error = await self._outcome()
        if error is None:
            return grpc.aio.Metadata()
        return cast(grpc.aio.Metadata, error.trailing_metadata())

    async def wait_for_connection(self) -> None:
        return None

    async def _outcome(self) -> grpc.aio.AioRpcError | None:
        await asyncio.wait({self._task})
        if self._task.cancelled():
            return _Status(grpc.StatusCode.CANCELLED, _LOCALLY_CANCELLED).error()
        error = self._task.exception()
        if error is None:
            return None
        if isinstance(error, grpc.aio.AioRpcError):
            return error
        raise error


class StreamStreamCall:
    """A bidirectional stream in flight (``grpc.aio.StreamStreamCall``, reader/writer style)."""

    def __init__(
        self,
        channel: InProcessChannel,
        server: InProcessServer,
        call: _ServerCall | Awaitable[_ServerCall],
        serializer: Any,
        deserializer: Any,
    ) -> None:
        self._channel = channel
        self._server = server
        self._serializer = serializer
        self._deserializer = deserializer
        self._call: _ServerCall | None = call if isinstance(call, _ServerCall) else None
        self._opening = None if isinstance(call, _ServerCall) else asyncio.ensure_future(call)
        self._done_writing = False
        self._locally_cancelled = False
        self._status: _Status | None = None
        channel.active.add(self)

    async def _server_call(self) -> _ServerCall:
        if self._call is None:
            assert self._opening is not None
            self._call = await self._opening
        return self._call

    async def write(self, request: Any) -> None:
        if self.done():
            raise asyncio.InvalidStateError("RPC already finished.")
        if self._done_writing:
            raise asyncio.InvalidStateError('RPC is half closed after calling "done_writing".')
        data = _encode(request, self._serializer)
        call = await self._server_call()
        await _run_on(self._server, _put_request(call, data))

    async def done_writing(self) -> None:
        if self.done() or self._done_writing:
            return
        self._done_writing = True
        call = await self._server_call()
        await _run_on(self._server, _put_request(call, _END))

    async def read(self) -> Any:
        if self._locally_cancelled:
            raise asyncio.CancelledError()
        if self._status is not None:
            return self._end()
        call = await self._server_call()
        try:
            item = await _run_on(self._server, call.responses.get())
        except asyncio.CancelledError:
            self.cancel()  # as gRPC: a cancelled read cancels the call
            raise
        if self._locally_cancelled:
            raise asyncio.CancelledError()
        if item is _END:
            call.responses.put(_END)
            self._status = _status(call)
            self._channel.active.discard(self)
            return self._end()
        return _decode(item, self._deserializer)

    def _end(self) -> Any:
        assert self._status is not None
        if self._status.code is not grpc.StatusCode.OK:
            raise self._status.error()
        return _EOF

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is _EOF:
                return
            yield message

    def cancel(self) -> bool:
        if self.done():
            return False
        self._locally_cancelled = True
        self._status = _Status(grpc.StatusCode.CANCELLED, _LOCALLY_CANCELLED)
        self._channel.active.discard(self)
        status = self._status
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()

        def cancel_on_engine(call: _ServerCall) -> None:
            call.cancel(status)
            call.responses.clear()
            call.responses.put(_END)

        call = self._call
        if call is not None:
            if _on_loop_of(self._server):
                cancel_on_engine(call)
            else:
                self._server.loop.call_soon_threadsafe(cancel_on_engine, call)
        return True

    def cancelled(self) -> bool:
        return self._locally_cancelled

    def done(self) -> bool:
        return self._status is not None

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        raise NotImplementedError("add_done_callback is not supported on in-process streams")

    def time_remaining(self) -> float | None:
        return None

    async def code(self) -> grpc.StatusCode:
        return (await self._final()).code

    async def details(self) -> str:
        return (await self._final()).details

    async def initial_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata()

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata(*(await self._final()).trailing_metadata)

    async def wait_for_connection(self) -> None:
        await self._server_call()

    async def _final(self) -> _Status:
        if self._status is not None:
            return self._status
        call = await self._server_call()
        await _run_on(self._server, _wait_finished(call))
        return _status(call)


async def _put_request(call: _ServerCall, data: Any) -> None:
    if call.status is not None:
        return  # the server side ended: gRPC drops what is still sent
    if data is not _END and len(data) > call.server.max_receive_bytes:
        call.cancel(_too_large("SERVER: Received", len(data), call.server.max_receive_bytes))
        return
    call.requests.put(data)


async def _wait_finished(call: _ServerCall) -> None:
    if call.status is None:
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: Any) -> None:
            if not finished.done():
                finished.set_result(None)

        call.add_done_callback(wake)
        await finished


async def _unary_on(
    server: InProcessServer,
    method: str,
    metadata: tuple[tuple[str, str | bytes], ...],
    call_timeout: float | None,
    request: bytes,
) -> bytes:
    return await server.start_unary(method, metadata, call_timeout, request)


async def _open_stream(
    server: InProcessServer,
    method: str,
    metadata: tuple[tuple[str, str | bytes], ...],
    call_timeout: float | None,
) -> _ServerCall:
    return server.open_stream(method, metadata, call_timeout)


class _MultiCallable:
    """What ``channel.unary_unary(...)`` and ``channel.stream_stream(...)`` return."""

    def __init__(self, channel: InProcessChannel, method: str, serializer: Any, deserializer: Any):
        self._channel = channel
        self._method = method
        self._serializer = serializer
        self._deserializer = deserializer


class _UnaryUnaryMultiCallable(_MultiCallable):
    def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: bool | None = None,
        compression: Any = None,
    ) -> Any:
        channel = self._channel
        channel.check_open(credentials)
        server = channel.target()
        if server is None:  # nothing serves the address in process (now): gRPC's turn
            return channel.fallback().unary_unary(
                self._method, self._serializer, self._deserializer
            )(
                request,
                timeout=timeout,
                metadata=metadata,
                wait_for_ready=wait_for_ready,
                compression=compression,
            )
        data = _encode(request, self._serializer)
        metadata_tuple = _metadata_tuple(metadata)
        if _on_loop_of(server):
            response: Awaitable[bytes] = server.start_unary(
                self._method, metadata_tuple, timeout, data
            )
        else:
            response = asyncio.wrap_future(
                server.submit(_unary_on(server, self._method, metadata_tuple, timeout, data))
            )
        return UnaryUnaryCall(channel, response, self._deserializer)


class _StreamStreamMultiCallable(_MultiCallable):
    def __call__(
        self,
        request_iterator: Any = None,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: bool | None = None,
        compression: Any = None,
    ) -> Any:
        if request_iterator is not None:
            raise NotImplementedError(
                "in-process streams are reader/writer style: call write() and done_writing()"
            )
        channel = self._channel
        channel.check_open(credentials)
        server = channel.target()
        if server is None:  # nothing serves the address in process (now): gRPC's turn
            return channel.fallback().stream_stream(
                self._method, self._serializer, self._deserializer
            )(
                timeout=timeout,
                metadata=metadata,
                wait_for_ready=wait_for_ready,
                compression=compression,
            )
        metadata_tuple = _metadata_tuple(metadata)
        if _on_loop_of(server):
            opened: _ServerCall | Awaitable[_ServerCall] = server.open_stream(
                self._method, metadata_tuple, timeout
            )
        else:
            opened = asyncio.wrap_future(
                server.submit(_open_stream(server, self._method, metadata_tuple, timeout))
            )
        return StreamStreamCall(channel, server, opened, self._serializer, self._deserializer)


class _UnsupportedMultiCallable:
    """Built for every method a generated stub names; the engine serves none of these."""

    def __init__(self, method: str, kind: str) -> None:
        self._method = method
        self._kind = kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self._method}: the in-process channel carries unary and bidirectional "
            f"stream calls, not {self._kind} ones (the engine serves none)"
        )


class InProcessChannel:
    """The part of ``grpc.aio.Channel`` the Dex SDK uses, to an :class:`InProcessServer`.

    Given a ``server``, every call goes to it. Given an ``address`` instead, each call
    goes to the server registered for it at that moment, or, with none, over a real
    gRPC channel to the address: like a gRPC channel, it reaches an engine restarted
    on the same address, and fails as gRPC does while none listens.
    """

    def __init__(
        self, server: InProcessServer | None = None, *, address: str | None = None
    ) -> None:
        if (server is None) == (address is None):
            raise ValueError("give an InProcessChannel either a server or an address")
        self._server = server
        self.address = address
        self.active: set[UnaryUnaryCall | StreamStreamCall] = set()
        self._closed = False
        self._fallback: grpc.aio.Channel | None = None

    def target(self) -> InProcessServer | None:
        """The server this channel's next call goes to; None: over gRPC."""
        if self._server is not None:
            return self._server
        assert self.address is not None
        return server_at(self.address)

    def fallback(self) -> grpc.aio.Channel:
        """The real gRPC channel to ``address``, opened on first use."""
        if self._fallback is None:
            assert self.address is not None
            self._fallback = grpc.aio.insecure_channel(self.address)
        return self._fallback

    def check_open(self, credentials: Any) -> None:
        if credentials is not None:
            raise NotImplementedError("per-call credentials need a real gRPC channel")
        if self._closed:
            raise grpc.aio.UsageError("Channel is closed.")

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> _UnaryUnaryMultiCallable:
        return _UnaryUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    def stream_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> _StreamStreamMultiCallable:
        return _StreamStreamMultiCallable(self, method, request_serializer, response_deserializer)

    def unary_stream(self, method: str, *codec: Any, **options: Any) -> _UnsupportedMultiCallable:
        del codec, options
        return _UnsupportedMultiCallable(method, "unary-stream")

    def stream_unary(self, method: str, *codec: Any, **options: Any) -> _UnsupportedMultiCallable:
        del codec, options
        return _UnsupportedMultiCallable(method, "stream-unary")

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        del try_to_connect
        if self._closed:
            return grpc.ChannelConnectivity.SHUTDOWN
        return grpc.ChannelConnectivity.READY

    async def channel_ready(self) -> None:
        return None

    async def close(self, grace: float | None = None) -> None:
        """Close the channel; after ``grace`` seconds, cancel the calls still active."""
        if self._closed:
            return
        self._closed = True
        calls = tuple(self.active)
        if grace:
            pending = [asyncio.ensure_future(call.code()) for call in calls if not call.done()]
            if pending:
                await asyncio.wait(pending, timeout=grace)
                for waiting in pending:
                    waiting.cancel()
        for call in calls:
            call.cancel()
        self.active.clear()
        if self._fallback is not None:
            await self._fallback.close(grace)

    async def __aenter__(self) -> InProcessChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(None)


# --- which addresses are served in process ---------------------------------------------

_SERVERS: dict[str, InProcessServer] = {}
_SERVERS_LOCK = threading.Lock()


def register(address: str, server: InProcessServer) -> None:
    """Serve ``address`` in process: patched SDK channels to it become in-process ones."""
    with _SERVERS_LOCK:
        if address in _SERVERS and _SERVERS[address] is not server:
            raise RuntimeError(f"{address} is already served in process")
        _SERVERS[address] = server


def unregister(address: str, server: InProcessServer) -> None:
    """Stop serving ``address`` in process (new channels to it use gRPC again)."""
    with _SERVERS_LOCK:
        if _SERVERS.get(address) is server:
            del _SERVERS[address]


def server_at(address: str) -> InProcessServer | None:
    """The in-process server registered for exactly ``address``, if any."""
    with _SERVERS_LOCK:
        return _SERVERS.get(address)
