"""The gRPC server interceptor that checks every request where it enters the engine.

A request that does not parse is refused with INVALID_ARGUMENT (instead of gRPC's
UNKNOWN), and so is one that carries a ``Value`` over ``max_value_bytes`` (see
``_rules.limits``).
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import DecodeError

from dex_local_engine._rules import errors
from dex_local_engine._rules.limits import MalformedRequest, oversized_value, value_too_large


def _tolerant(deserializer: Any) -> Any:
    if deserializer is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as error:
            return MalformedRequest(str(error))

    return decode


class RequestCheckInterceptor(grpc.aio.ServerInterceptor):
    """Refuses, with INVALID_ARGUMENT, a request that does not parse (instead of gRPC's
    UNKNOWN) or that carries a ``Value`` over ``max_value_bytes``.

    Worker stream frames decode to ``MalformedRequest`` too; the stream handler
    refuses them, and checks the values of each result itself.
    """

    def __init__(self, max_value_bytes: int) -> None:
        self.max_value_bytes = max_value_bytes
        # Method name -> its wrapped handler. A method's handler never changes, and a
        # pull Worker opens a new task stream for nearly every Step, so each call
        # reuses the wrapping instead of building it again.
        self._wrapped: dict[str, Any] = {}

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        """Wrap each unary handler with the request size and shape checks."""
        method = str(handler_call_details.method)
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        wrapped = self._wrapped[method] = self._wrap(handler, method.rsplit("/", 1)[-1])
        return wrapped

    def _wrap(self, handler: Any, method: str) -> Any:
        codec = {
            "request_deserializer": _tolerant(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is None:
            if handler.stream_stream is not None:
                return grpc.stream_stream_rpc_method_handler(handler.stream_stream, **codec)
            return handler
        inner = handler.unary_unary
        limit = self.max_value_bytes

        async def checked(request: Any, context: Any) -> Any:
            if isinstance(request, MalformedRequest):
                await errors.abort(context, errors.invalid(request.describe(method)))
            found = oversized_value(request, limit)
            if found is not None:
                path, size = found
                detail = value_too_large(method, path, size, limit)
                await errors.abort(context, errors.invalid(detail))
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(checked, **codec)
