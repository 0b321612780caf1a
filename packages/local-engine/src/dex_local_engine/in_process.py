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

This module is the transport's public face: the channel, the server and the address
registry (their code is in ``dex_local_engine._transport``).
"""

from __future__ import annotations

from dex_local_engine._transport.in_process_channel import (
    InProcessChannel,
    StreamStreamCall,
    UnaryUnaryCall,
)
from dex_local_engine._transport.in_process_server import (
    InProcessServer,
    collect_method_handlers,
    register,
    server_at,
    unregister,
)

__all__ = [
    "InProcessChannel",
    "InProcessServer",
    "StreamStreamCall",
    "UnaryUnaryCall",
    "collect_method_handlers",
    "register",
    "server_at",
    "unregister",
]
