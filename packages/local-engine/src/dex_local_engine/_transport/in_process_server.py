"""The engine's side of in-process calls: its method handlers, on its event loop.

:class:`InProcessServer` runs each call through the engine's gRPC server interceptors
and own method handlers (see :func:`collect_method_handlers`), with a
``in_process_call.ServerCall`` as the handler's servicer context.
:func:`register` serves an address in process, for the client side,
:class:`dex_local_engine.in_process.InProcessChannel`, to find with :func:`server_at`
(that module describes the transport as a whole).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import grpc

from dex_local_engine._transport.in_process_call import (
    CANCELLED_LOCALLY,
    EOF,
    MetadataPairs,
    ServerCall,
    Status,
    decode,
    encode,
    refused_request,
    refused_response,
)

__all__ = [
    "InProcessServer",
    "collect_method_handlers",
    "register",
    "server_at",
    "unregister",
]

# The transport's one logger, whichever part logs.
_LOG = logging.getLogger("dex_local_engine.in_process")
_T = TypeVar("_T")

_STOPPED = Status(grpc.StatusCode.UNAVAILABLE, "the in-process engine stopped")


class _CallDetails(NamedTuple):
    """What server interceptors see of a call (``grpc.HandlerCallDetails``)."""

    method: str
    invocation_metadata: MetadataPairs


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
        self.active: set[ServerCall] = set()
        self.stopped = False

    async def stop(self, grace: float | None = None) -> None:
        """Refuse new calls; after ``grace`` seconds end the active ones (UNAVAILABLE)."""
        self.stopped = True
        if grace and self.active:
            tasks = [call.task for call in self.active if call.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=grace)
        for call in tuple(self.active):
            call.cancel(_STOPPED)

    # --- calls, on the engine's loop ---------------------------------------------------

    async def _method(self, call: ServerCall, kind: str) -> Any:
        """The handler function of ``kind`` (``unary_unary``...) for the call, found through
        the interceptors; None (and the call ended UNIMPLEMENTED) if none serves it."""
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
        if handler is None or getattr(handler, kind) is None:
            call.finish(Status(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
            return None
        call.request_deserializer = handler.request_deserializer
        call.response_serializer = handler.response_serializer
        return getattr(handler, kind)

    def open_call(self, method: str, metadata: MetadataPairs, timeout: float | None) -> ServerCall:
        """A new call's server side; an already ended one when the server stopped."""
        call = ServerCall(self, method, metadata, timeout)
        if self.stopped:
            call.finish(_STOPPED)
        else:
            self.active.add(call)
        return call

    def start_unary(
        self, method: str, metadata: MetadataPairs, timeout: float | None, request: bytes
    ) -> asyncio.Task[bytes]:
        """Start a unary call in a task of its own, on this (the engine's) loop."""
        call = self.open_call(method, metadata, timeout)
        task = self.loop.create_task(self._unary(call, request), context=contextvars.Context())
        call.start_deadline(task)
        # A task cancelled before it ran still ends its call.
        task.add_done_callback(lambda _: call.cancel(CANCELLED_LOCALLY))
        return task

    async def _unary(self, call: ServerCall, request: bytes) -> bytes:
        response = b""
        try:
            if call.status is None:
                response = await self._serve_unary(call, request)
        except asyncio.CancelledError:
            if call.status is None:  # the client cancelled
                call.cancel(CANCELLED_LOCALLY)
                raise
            # Ended by the deadline or the server stopping: the client sees that status.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        status = call.final_status()
        if status.code is not grpc.StatusCode.OK:
            raise status.error()
        return response

    async def _serve_unary(self, call: ServerCall, request: bytes) -> bytes:
        refused = refused_request(len(request), self.max_receive_bytes)
        if refused is not None:
            call.finish(refused)
            return b""
        unary_unary = await self._method(call, "unary_unary")
        if unary_unary is None:
            return b""
        try:
            result = unary_unary(decode(request, call.request_deserializer), call)
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
        data = encode(result, call.response_serializer)
        call.finish(refused_response(len(data), self.max_send_bytes) or status)
        return data

    def open_stream(
        self, method: str, metadata: MetadataPairs, timeout: float | None
    ) -> ServerCall:
        """Start a bidirectional stream call; its handler runs in a task of its own."""
        call = self.open_call(method, metadata, timeout)
        if call.status is None:
            call.start_deadline(
                self.loop.create_task(self._serve_stream(call), context=contextvars.Context())
            )
        return call

    async def _serve_stream(self, call: ServerCall) -> None:
        try:
            await self._run_stream_handler(call)
        except asyncio.CancelledError:
            call.cancel(Status(grpc.StatusCode.CANCELLED, "Cancelled"))

    async def _run_stream_handler(self, call: ServerCall) -> None:
        stream_stream = await self._method(call, "stream_stream")
        if stream_stream is None:
            return
        try:
            result = stream_stream(_request_iterator(call), call)
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
            raise Status(
                grpc.StatusCode.UNAVAILABLE, "the in-process engine's event loop is not running"
            ).error()
        self.loop.call_soon_threadsafe(start, context=contextvars.Context())
        return future


async def _request_iterator(call: ServerCall) -> AsyncIterator[Any]:
    while True:
        message = await call.read()
        if message is EOF:
            return
        yield message


def _unexpected(error: Exception, method: str) -> Status:
    # As gRPC's asyncio server: logged, and UNKNOWN with the error's type and text.
    _LOG.exception("Unexpected [%s] raised by servicer method [%s]", type(error).__name__, method)
    return Status(grpc.StatusCode.UNKNOWN, f"Unexpected {type(error)}: {error}")


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
