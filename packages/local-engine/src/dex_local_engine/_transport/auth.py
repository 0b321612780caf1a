"""Bearer-token authentication of every call, and the rule for where the engine may listen.

The Dex SDK sends ``authorization: Bearer <token>`` on every Client call and every
Worker stream when ``ClientOptions.credential`` / ``WorkerOptions.credential`` is set
(``dex.FileCredential`` reads it from a file). With a token configured, the engine
refuses any call without that exact header, compared in constant time, with
UNAUTHENTICATED before a handler runs: Worker task streams included.

The SDK 1.23.0 speaks plaintext gRPC only (its channels are insecure channels), so
the token crosses the network in clear text: keep the engine on loopback, or put it
behind a TLS-terminating proxy or a private network.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path
from typing import Any

import grpc

__all__ = [
    "TOKEN_ENVIRONMENT_VARIABLE",
    "BearerTokenInterceptor",
    "InsecureListenError",
    "check_listen_address",
    "is_loopback",
    "read_token",
]

TOKEN_ENVIRONMENT_VARIABLE = "DEX_LOCAL_ENGINE_TOKEN"
_UNAUTHENTICATED = "missing or wrong bearer token; set the SDK's credential to the engine's token"


class InsecureListenError(ValueError):
    """A non-loopback address without a token and without the explicit insecure opt-in."""


def read_token(token_file: str | os.PathLike[str] | None = None) -> str | None:
    """The token from ``token_file`` when given, else ``DEX_LOCAL_ENGINE_TOKEN``, else ``None``.

    Surrounding whitespace is removed; an empty file is an error, not "no token".
    """
    if token_file is not None:
        token = Path(token_file).read_text(encoding="utf-8").strip()
        if not token:
            raise ValueError(f"the token file {os.fspath(token_file)!r} is empty")
        return token
    token = os.environ.get(TOKEN_ENVIRONMENT_VARIABLE, "").strip()
    return token or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or ``localhost``) reaches only this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name may resolve anywhere


def check_listen_address(host: str, *, token: str | None, allow_insecure: bool) -> None:
    """Refuse to serve every session to the network without a token, unless asked to."""
    if token is None and not allow_insecure and not is_loopback(host):
        raise InsecureListenError(
            f"refusing to listen on {host!r} without a token: any peer that reaches it "
            f"could read and drive every session. Give a token (--token-file, or "
            f"{TOKEN_ENVIRONMENT_VARIABLE}), listen on 127.0.0.1, or pass "
            "--insecure-no-auth to accept unauthenticated peers"
        )


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Lets a call through only with ``authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self._expected = f"Bearer {token}".encode()

    def _authorized(self, handler_call_details: Any) -> bool:
        presented = b""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                presented = value.encode() if isinstance(value, str) else bytes(value)
        return hmac.compare_digest(presented, self._expected)

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        """Let a call with the right bearer token through; refuse the others."""
        if self._authorized(handler_call_details):
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return _refusing_handler(handler)


async def _refuse(request: Any, context: Any) -> Any:
    del request
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)


def _refusing_handler(handler: Any) -> Any:
    """A handler of the same shape as ``handler`` that refuses with UNAUTHENTICATED."""
    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(_refuse, **codec)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(_refuse, **codec)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(_refuse, **codec)
    return grpc.stream_stream_rpc_method_handler(_refuse, **codec)
