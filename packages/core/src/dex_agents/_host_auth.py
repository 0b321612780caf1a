"""The host's bearer token: where it comes from, how it travels, what a refusal says.

dex-python-sdk sends ``authorization: Bearer <token>`` on every Client call and every
Worker stream when its options carry a ``dex.Credential``. ``AgentHost(auth_token=...)``
takes the token (or any ``dex.Credential``, such as ``dex.FileCredential`` for a token
file another process rotates); without it the host reads ``DEX_SERVER_TOKEN``. A server
that refuses the token answers UNAUTHENTICATED, which the SDK's Worker reports as a
protocol-version mismatch; ``authentication_error`` turns both the Client's and the
Worker's refusal into an ``AuthenticationError`` that says what to check.

The SDK speaks plaintext gRPC only, so the token crosses the network in clear text:
keep the server on loopback or a private network, or behind a TLS-terminating proxy.
"""

from __future__ import annotations

import os
from typing import Any

import dex
import grpc

__all__ = [
    "TOKEN_VARIABLE",
    "AuthenticationError",
    "authentication_error",
    "bearer_metadata",
    "resolve_credential",
]

TOKEN_VARIABLE = "DEX_SERVER_TOKEN"
"""The environment variable an ``AgentHost`` reads its bearer token from when
``auth_token`` is not given (only when it talks to a Dex server by address)."""

_SERVER_SIDE = (
    "the server's token (`dex-local-engine serve --token-file FILE` or its "
    "DEX_LOCAL_ENGINE_TOKEN variable; Dex Server's own authentication settings)"
)


class AuthenticationError(ConnectionError):
    """The Dex server refused this host's bearer token (gRPC UNAUTHENTICATED).

    Raised by ``AgentHost.start()`` (and ``serve()``) for the Client's first call and
    the Worker's start-up; the message says whether a token was sent and what to
    check. ``address`` is the server's address.
    """

    __module__ = "dex_agents"  # the public import path, as tracebacks show it

    def __init__(self, message: str, *, address: str) -> None:
        super().__init__(message)
        self.address = address
        """``host:port`` of the server that refused the token."""


class _StaticToken:
    """A fixed bearer token, read on the event loop (an ``async def token``: the SDK
    runs a sync one on a thread of its own for every call)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    def __repr__(self) -> str:  # never show the token
        return "_StaticToken(<hidden>)"


def check_token(token: object, name: str = "auth_token") -> str:
    """``token`` stripped, or a ``TypeError``/``ValueError`` naming ``name``."""
    if not isinstance(token, str):
        raise TypeError(f"{name} must be a str or a dex.Credential, not {type(token).__name__}")
    stripped = token.strip()
    if not stripped:
        raise ValueError(f"{name} must not be empty")
    if any(not (" " < character <= "~") for character in stripped):
        raise ValueError(
            f"{name} must be printable ASCII without spaces (it travels as a gRPC header)"
        )
    return stripped


def _environment_token() -> str | None:
    """``DEX_SERVER_TOKEN`` checked, or ``None`` when it is unset or blank."""
    from_environment = os.environ.get(TOKEN_VARIABLE, "").strip()
    return check_token(from_environment, TOKEN_VARIABLE) if from_environment else None


def resolve_credential(auth_token: object) -> dex.Credential | None:
    """The credential for ``auth_token`` (a str or a ``dex.Credential``), else from
    ``DEX_SERVER_TOKEN``, else ``None``."""
    if auth_token is None:
        from_environment = _environment_token()
        return _StaticToken(from_environment) if from_environment else None
    if isinstance(auth_token, str):
        return _StaticToken(check_token(auth_token))
    if callable(getattr(auth_token, "token", None)):
        credential: Any = auth_token
        return credential
    check_token(auth_token)  # raises the TypeError
    return None


def bearer_metadata(token: str | None = None) -> tuple[tuple[str, str], ...] | None:
    """gRPC call metadata carrying ``token``, else ``DEX_SERVER_TOKEN``, else ``None``:
    for the raw FlowService reads (history, Attributes) the SDK's Client does not wrap."""
    checked = _environment_token() if token is None else check_token(token, "token")
    return None if checked is None else (("authorization", f"Bearer {checked}"),)


def _refused(failure: BaseException | None) -> str | None:
    """The server's detail when ``failure`` (or what caused it) is UNAUTHENTICATED."""
    seen = 0
    while failure is not None and seen < 5:
        if isinstance(failure, dex.DexServiceError):
            if failure.code == grpc.StatusCode.UNAUTHENTICATED:
                return str(failure)
        elif isinstance(failure, grpc.RpcError):
            call: Any = failure
            if call.code() == grpc.StatusCode.UNAUTHENTICATED:
                return str(call.details() or "")
        failure = failure.__cause__ or failure.__context__
        seen += 1
    return None


def authentication_error(
    failure: BaseException, *, address: str, who: str, sent_token: bool
) -> AuthenticationError | None:
    """An ``AuthenticationError`` when ``failure`` is the server refusing ``who``'s
    token (``"Client"`` or ``"Worker"``), else ``None``."""
    detail = _refused(failure)
    if detail is None:
        return None
    if sent_token:
        what = f"refused the {who}'s bearer token"
        check = (
            f"check the token value given as AgentHost(auth_token=...) or {TOKEN_VARIABLE} "
            f"in this process against {_SERVER_SIDE}"
        )
    else:
        what = f"requires a bearer token and the {who} sent none"
        check = (
            f"give the server's token as AgentHost(auth_token=...) or set {TOKEN_VARIABLE} "
            f"in this process; it must equal {_SERVER_SIDE}"
        )
    return AuthenticationError(
        f"authentication failed: the Dex server at {address} {what} "
        f"(UNAUTHENTICATED: {detail}); {check}",
        address=address,
    )
