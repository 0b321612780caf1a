"""The client side of in-process calls: the channel the Dex SDK gets, and its calls.

See :mod:`dex_local_engine.in_process` for the transport as a whole; the engine's side
is ``in_process_server`` (the server and the address registry) and
``in_process_call`` (a call's servicer context).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

import grpc

from dex_local_engine._transport.in_process_call import (
    CANCELLED_LOCALLY,
    EOF,
    OK,
    MetadataPairs,
    ServerCall,
    Status,
    decode,
    encode,
    metadata_tuple,
)
from dex_local_engine._transport.in_process_server import InProcessServer, server_at

__all__ = ["InProcessChannel", "StreamStreamCall", "UnaryUnaryCall"]

_T = TypeVar("_T")


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


class _Call:
    """What unary calls and streams share of ``grpc.aio.Call``, given the final status."""

    _locally_cancelled: bool

    async def _final(self) -> Status:
        raise NotImplementedError

    def cancelled(self) -> bool:
        return self._locally_cancelled

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


class UnaryUnaryCall(_Call):
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
        return decode(data, self._deserializer)

    def cancel(self) -> bool:
        if self._task.done():
            return False
        self._locally_cancelled = True
        self._task.cancel()
        return True

    def done(self) -> bool:
        return self._task.done()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._task.add_done_callback(lambda _: callback(self))

    async def wait_for_connection(self) -> None:
        return None

    async def _final(self) -> Status:
        await asyncio.wait({self._task})
        if self._task.cancelled():
            return CANCELLED_LOCALLY
        error = self._task.exception()
        if error is None:
            return OK
        if isinstance(error, grpc.aio.AioRpcError):
            trailing = cast(grpc.aio.Metadata, error.trailing_metadata())
            return Status(error.code(), str(error.details()), tuple(trailing))
        raise error


class StreamStreamCall(_Call):
    """A bidirectional stream in flight (``grpc.aio.StreamStreamCall``, reader/writer style)."""

    def __init__(
        self,
        channel: InProcessChannel,
        server: InProcessServer,
        call: ServerCall | Awaitable[ServerCall],
        serializer: Any,
        deserializer: Any,
    ) -> None:
        self._channel = channel
        self._server = server
        self._serializer = serializer
        self._deserializer = deserializer
        self._call: ServerCall | None = call if isinstance(call, ServerCall) else None
        self._opening = None if isinstance(call, ServerCall) else asyncio.ensure_future(call)
        self._done_writing = False
        self._locally_cancelled = False
        self._status: Status | None = None
        channel.active.add(self)

    async def _server_call(self) -> ServerCall:
        if self._call is None:
            assert self._opening is not None
            self._call = await self._opening
        return self._call

    async def write(self, request: Any) -> None:
        if self.done():
            raise asyncio.InvalidStateError("RPC already finished.")
        if self._done_writing:
            raise asyncio.InvalidStateError('RPC is half closed after calling "done_writing".')
        data = encode(request, self._serializer)
        call = await self._server_call()
        await _run_on(self._server, call.receive(data))

    async def done_writing(self) -> None:
        if self.done() or self._done_writing:
            return
        self._done_writing = True
        call = await self._server_call()
        await _run_on(self._server, call.receive(None))

    async def read(self) -> Any:
        if self._locally_cancelled:
            raise asyncio.CancelledError()
        if self._status is not None:
            return self._end()
        call = await self._server_call()
        try:
            data = await _run_on(self._server, call.next_response())
        except asyncio.CancelledError:
            self.cancel()  # as gRPC: a cancelled read cancels the call
            raise
        if self._locally_cancelled:
            raise asyncio.CancelledError()
        if data is None:
            self._status = call.final_status()
            self._channel.active.discard(self)
            return self._end()
        return decode(data, self._deserializer)

    def _end(self) -> Any:
        assert self._status is not None
        if self._status.code is not grpc.StatusCode.OK:
            raise self._status.error()
        return EOF

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is EOF:
                return
            yield message

    def cancel(self) -> bool:
        if self.done():
            return False
        self._locally_cancelled = True
        self._status = CANCELLED_LOCALLY
        self._channel.active.discard(self)
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        call = self._call
        if call is not None:
            if _on_loop_of(self._server):
                call.cancel_by_client(CANCELLED_LOCALLY)
            else:
                self._server.loop.call_soon_threadsafe(call.cancel_by_client, CANCELLED_LOCALLY)
        return True

    def done(self) -> bool:
        return self._status is not None

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        raise NotImplementedError("add_done_callback is not supported on in-process streams")

    async def wait_for_connection(self) -> None:
        await self._server_call()

    async def _final(self) -> Status:
        if self._status is not None:
            return self._status
        call = await self._server_call()
        return await _run_on(self._server, call.wait_finished())


async def _unary_on(
    server: InProcessServer,
    method: str,
    metadata: MetadataPairs,
    call_timeout: float | None,
    request: bytes,
) -> bytes:
    return await server.start_unary(method, metadata, call_timeout, request)


async def _open_stream(
    server: InProcessServer,
    method: str,
    metadata: MetadataPairs,
    call_timeout: float | None,
) -> ServerCall:
    return server.open_stream(method, metadata, call_timeout)


class _MultiCallable:
    """What ``channel.unary_unary(...)`` and ``channel.stream_stream(...)`` return."""

    def __init__(self, channel: InProcessChannel, method: str, serializer: Any, deserializer: Any):
        self._channel = channel
        self._method = method
        self._serializer = serializer
        self._deserializer = deserializer

    def _server(self, credentials: Any) -> InProcessServer | None:
        """The server a new call goes to; None: nothing serves the address in process
        (now), so the call is gRPC's, over the channel's fallback."""
        self._channel.check_open(credentials)
        return self._channel.target()


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
        server = self._server(credentials)
        if server is None:
            over_grpc = self._channel.fallback().unary_unary(
                self._method, self._serializer, self._deserializer
            )
            return over_grpc(
                request,
                timeout=timeout,
                metadata=metadata,
                wait_for_ready=wait_for_ready,
                compression=compression,
            )
        data = encode(request, self._serializer)
        pairs = metadata_tuple(metadata)
        if _on_loop_of(server):
            response: Awaitable[bytes] = server.start_unary(self._method, pairs, timeout, data)
        else:
            response = asyncio.wrap_future(
                server.submit(_unary_on(server, self._method, pairs, timeout, data))
            )
        return UnaryUnaryCall(self._channel, response, self._deserializer)


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
        server = self._server(credentials)
        if server is None:
            over_grpc = self._channel.fallback().stream_stream(
                self._method, self._serializer, self._deserializer
            )
            return over_grpc(
                timeout=timeout,
                metadata=metadata,
                wait_for_ready=wait_for_ready,
                compression=compression,
            )
        pairs = metadata_tuple(metadata)
        if _on_loop_of(server):
            opened: ServerCall | Awaitable[ServerCall] = server.open_stream(
                self._method, pairs, timeout
            )
        else:
            opened = asyncio.wrap_future(
                server.submit(_open_stream(server, self._method, pairs, timeout))
            )
        return StreamStreamCall(self._channel, server, opened, self._serializer, self._deserializer)


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
