"""One in-process call's server side: the servicer context its handler gets.

:class:`ServerCall` carries a call between the client side
(:mod:`dex_local_engine.in_process`) and the engine's handler
(``in_process_server``): the requests and responses as bytes, and
the :class:`Status` the call ends with, gRPC's texts and size limits included.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeAlias, cast

import grpc

__all__ = [
    "CANCELLED_LOCALLY",
    "EOF",
    "OK",
    "CallHost",
    "MetadataPairs",
    "ServerCall",
    "Status",
    "decode",
    "encode",
    "metadata_tuple",
    "refused_request",
    "refused_response",
]

# The transport's one logger, whichever part logs.
_LOG = logging.getLogger("dex_local_engine.in_process")

MetadataPairs: TypeAlias = tuple[tuple[str, str | bytes], ...]
"""A call's metadata as (key, value) pairs."""

CLIENT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024
"""gRPC's default receive limit, which the SDK's channels keep."""

EOF: Any = vars(grpc.aio)["EOF"]  # not in the typing stubs
"""What a stream's ``read()`` returns once the other side is done writing."""

_PEER = "in-process"


class Status(NamedTuple):
    """How a call ended: a gRPC status code, its details and trailing metadata."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: MetadataPairs = ()

    def error(self) -> grpc.aio.AioRpcError:
        """The error a caller gets for this status."""
        return grpc.aio.AioRpcError(
            self.code,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(*self.trailing_metadata),
            self.details,
            None,
        )


OK = Status(grpc.StatusCode.OK, "")
"""The status of a call that succeeded."""
CANCELLED_LOCALLY = Status(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
"""The status of a call its client cancelled, with gRPC's text."""


_END = object()  # the end of a direction of a call


class _Pipe:
    """Messages one way within a call, on the engine's loop: bytes, then the end mark,
    which every later read sees again."""

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def ready(self) -> int:
        """How many messages a read gets now without waiting (the end mark counts)."""
        return len(self._items)

    def discard(self) -> None:
        """Drop the messages not read yet: the next read sees the end."""
        self._items.clear()
        self.put(_END)

    async def get(self) -> Any:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._items[0] is _END:
            return _END
        return self._items.popleft()


class CallHost(Protocol):
    """What a call needs of the in-process server that runs it (``InProcessServer``)."""

    loop: asyncio.AbstractEventLoop
    max_receive_bytes: int
    max_send_bytes: int
    active: set[ServerCall]


class ServerCall:
    """One call's server side: its servicer context and state, on the engine's loop."""

    def __init__(
        self,
        server: CallHost,
        method: str,
        metadata: MetadataPairs,
        timeout: float | None,
    ) -> None:
        self.server = server
        self.method = method
        self.metadata = metadata
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.requests = _Pipe()
        self.responses = _Pipe()
        self.status: Status | None = None
        self.task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._deadline_handle: asyncio.TimerHandle | None = None
        self.request_deserializer: Any = None
        self.response_serializer: Any = None
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: MetadataPairs = ()
        self._done_callbacks: list[Callable[[Any], None]] = []

    def finish(self, status: Status) -> None:
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

    def cancel(self, status: Status) -> None:
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
                Status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
            )

    def end_status(self) -> Status:
        """The status the handler set (``set_code``, ``abort``): what it ends with."""
        if self._code is None or self._code is grpc.StatusCode.OK:
            return OK
        return Status(self._code, self._details, self._trailing)

    def final_status(self) -> Status:
        """The status the call ended with; only once it ended."""
        assert self.status is not None, "a served call always ends with a status"
        return self.status

    # --- the client's end of a stream, on the engine's loop ----------------------------

    async def receive(self, data: bytes | None) -> None:
        """A request from the client; None: the client is done writing."""
        if self.status is not None:
            return  # the server side ended: gRPC drops what is still sent
        if data is None:
            self.requests.put(_END)
            return
        refused = refused_request(len(data), self.server.max_receive_bytes)
        if refused is not None:
            self.cancel(refused)
        else:
            self.requests.put(data)

    async def next_response(self) -> bytes | None:
        """The next response; None once the call ended (see :meth:`final_status`)."""
        item = await self.responses.get()
        return None if item is _END else item

    async def wait_finished(self) -> Status:
        """Wait until the call ends; its status."""
        if self.status is None:
            finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def wake(_: Any) -> None:
                if not finished.done():
                    finished.set_result(None)

            self.add_done_callback(wake)
            await finished
        return self.final_status()

    def cancel_by_client(self, status: Status) -> None:
        """The client cancelled: end the call and drop the responses it will not read."""
        self.cancel(status)
        self.responses.discard()

    # --- grpc.aio.ServicerContext ---------------------------------------------------

    def requests_ready(self) -> int:
        """Requests the client already sent that ``read`` returns without waiting; a
        gRPC servicer context has no such count, so the Worker-stream reader asks only
        for it (see ``Dispatcher.serve_stream``)."""
        return self.requests.ready()

    async def read(self) -> Any:
        item = await self.requests.get()
        return EOF if item is _END else decode(item, self.request_deserializer)

    async def write(self, message: Any) -> None:
        if self.status is not None:
            raise asyncio.InvalidStateError("RPC already finished.")
        data = encode(message, self.response_serializer)
        refused = refused_response(len(data), self.server.max_send_bytes)
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
        self._trailing = metadata_tuple(trailing_metadata) or self._trailing
        raise grpc.aio.AbortError()

    async def abort_with_status(self, status: Any) -> Any:
        await self.abort(status.code, status.details, status.trailing_metadata)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        self._trailing = metadata_tuple(trailing_metadata)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> MetadataPairs:
        return self._trailing

    def invocation_metadata(self) -> MetadataPairs:
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


def refused_request(size: int, max_receive_bytes: int) -> Status | None:
    """The status a request of ``size`` bytes ends its call with, if over the server's
    receive limit."""
    if size > max_receive_bytes:
        return _too_large("SERVER: Received", size, max_receive_bytes)
    return None


def refused_response(size: int, max_send_bytes: int) -> Status | None:
    """The status a response of ``size`` bytes ends its call with, if gRPC refuses it:
    over the server's send limit, or over the SDK channel's receive limit."""
    if size > max_send_bytes:
        return _too_large("SERVER: Sent", size, max_send_bytes)
    if size > CLIENT_MAX_RECEIVE_BYTES:
        return _too_large("CLIENT: Received", size, CLIENT_MAX_RECEIVE_BYTES)
    return None


def _too_large(what: str, size: int, limit: int) -> Status:
    return Status(
        grpc.StatusCode.RESOURCE_EXHAUSTED, f"{what} message larger than max ({size} vs. {limit})"
    )


def encode(message: Any, serializer: Any) -> bytes:
    """A message's bytes, through its registered serializer (if any)."""
    return bytes(message) if serializer is None else cast(bytes, serializer(message))


def decode(data: bytes, deserializer: Any) -> Any:
    """A message from its bytes, through its registered deserializer (if any)."""
    return data if deserializer is None else deserializer(data)


def metadata_tuple(metadata: Any) -> MetadataPairs:
    """Call metadata (pairs, ``grpc.aio.Metadata``, None) as a tuple of pairs."""
    if not metadata:
        return ()
    return tuple((str(key), value) for key, value in metadata)
