"""What keeps other sites out: one ASGI middleware in front of every route.

In order, for every HTTP request:

1. **Host allowlist.** The ``Host`` header must name an allowed host (by default the
   address the app is bound to, ``--allowed-host`` adds names), so a page of another
   site whose name a DNS rebinding points at this machine gets a 400, never the app.
2. **Sign-in** (only with an access token: a non-loopback bind needs one). Every route
   but the sign-in page needs the sign-in cookie (HttpOnly, SameSite=Strict) or an
   ``Authorization: Bearer <token>`` header.
3. **Same origin.** A state-changing request (any method but GET, HEAD, OPTIONS) with
   an ``Origin`` other than the request's own, or a ``Sec-Fetch-Site`` other than
   ``same-origin``, is refused (403); it must also carry the page's CSRF token in
   ``X-CSRF-Token`` (a custom header: another origin cannot send it without a CORS
   preflight, which this app never approves). The JSON reads refuse a ``Sec-Fetch-Site``
   of another site too.
4. **Body limit.** A body larger than ``max_body_bytes`` gets a 413 that names the
   limit, decided from ``Content-Length`` or while counting the chunks: it is never
   held in memory or parsed.
5. **Security headers** on every response: a Content-Security-Policy without inline
   script and with ``frame-ancestors 'none'`` (no framing, so no clickjacking of
   Approve), ``X-Frame-Options: DENY``, ``nosniff``, ``Referrer-Policy: no-referrer``,
   ``Cross-Origin-Opener-Policy`` and ``Cross-Origin-Resource-Policy``.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body: a 512 KiB message escaped to JSON at its worst, with room."""
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
"""Past this, an oversized body is no longer read to the end before the 413."""
CSRF_HEADER = "x-csrf-token"
CSRF_META = "dex-csrf-token"
SIGN_IN_PATH = "/sign-in"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")


def default_allowed_hosts(bound_host: str) -> frozenset[str]:
    """The names a browser may use for an app bound to ``bound_host``: the address
    itself, and for a loopback bind every loopback name."""
    name = bound_host.strip("[]").lower()
    return LOOPBACK_NAMES | {name} if is_loopback(name) else frozenset({name})


@dataclass(frozen=True)
class TrustSettings:
    """How the app decides whom to serve.

    ``allowed_hosts`` are host names without port (lower case); ``access_token`` turns
    on sign-in; ``csrf_secret`` derives the CSRF token (random per process unless a
    token is set, then derived from it so open pages survive a restart).
    """

    allowed_hosts: frozenset[str] = LOOPBACK_NAMES
    access_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    prefix: str = "/products/ai-agent"
    csrf_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @property
    def csrf_token(self) -> str:
        key = self.access_token.encode() if self.access_token else self.csrf_secret
        return hmac.new(key, b"dex-agents-ai-agent csrf", hashlib.sha256).hexdigest()

    def auth_cookie_value(self) -> str:
        assert self.access_token is not None
        key = self.access_token.encode()
        return hmac.new(key, b"dex-agents-ai-agent sign-in", hashlib.sha256).hexdigest()


class TrustMiddleware:
    """The checks of the module docstring, in front of ``app``."""

    def __init__(self, app: ASGIApp, settings: TrustSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(send)
        headers = _headers(scope)
        host = headers.get("host", "")
        if _host_name(host) not in self.settings.allowed_hosts:
            await _text(
                send,
                400,
                f"Host {host!r} is not allowed: this app answers only to "
                f"{', '.join(sorted(self.settings.allowed_hosts))} "
                "(start it with --allowed-host NAME to add a name).",
            )
            return
        method = scope.get("method", "GET")
        path: str = scope.get("path", "")
        sign_in = path == f"{self.settings.prefix}{SIGN_IN_PATH}"
        if method not in SAFE_METHODS:
            refusal = self._cross_origin_refusal(headers, host)
            if refusal:
                await _json(send, 403, {"error": refusal, "code": "cross_origin"})
                return
        elif path.startswith(self.settings.prefix) and _reads_json(path, self.settings.prefix):
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                await _json(send, 403, {"error": "cross-site read refused", "code": "cross_origin"})
                return
        if self.settings.access_token and not sign_in and not self._signed_in(scope, headers):
            if method == "GET" and not _reads_json(path, self.settings.prefix):
                await _redirect(send, f"{self.settings.prefix}{SIGN_IN_PATH}")
            else:
                await _json(send, 401, {"error": "sign in first", "code": "sign_in"})
            return
        bearer = self.settings.access_token is not None and _bearer(headers) is not None
        if method not in SAFE_METHODS and not sign_in and not bearer:
            token = headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(token.encode(), self.settings.csrf_token.encode()):
                message = "missing or stale CSRF token: reload the page"
                await _json(send, 403, {"error": message, "code": "csrf"})
                return
        if method not in SAFE_METHODS:
            body = await self._bounded_body(headers, receive, send)
            if body is None:
                return
            receive = _replay(body, receive)
        if sign_in:
            await self._sign_in(scope, method, receive, send)
            return
        await self.app(scope, receive, send)

    def _cross_origin_refusal(self, headers: dict[str, str], host: str) -> str:
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if origin == "null" or parts.netloc.lower() != host.lower():
                return f"cross-origin request from {origin} refused"
        site = headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return f"request from another site ({site}) refused"
        return ""

    def _signed_in(self, scope: Scope, headers: dict[str, str]) -> bool:
        token = self.settings.access_token
        assert token is not None
        bearer = _bearer(headers)
        if bearer is not None:
            return hmac.compare_digest(bearer.encode(), token.encode())
        cookie = _cookies(headers).get(_auth_cookie_name(scope), "")
        return hmac.compare_digest(cookie.encode(), self.settings.auth_cookie_value().encode())

    async def _bounded_body(
        self, headers: dict[str, str], receive: Receive, send: Send
    ) -> bytes | None:
        """The body, or ``None`` once a 413 (or a disconnect) ended the request."""
        limit = self.settings.max_body_bytes
        message = (
            f"the request body is larger than the limit of {limit:,} bytes "
            f"({limit // (1024 * 1024)} MiB)"
        )
        declared = headers.get("content-length", "")
        too_large = declared.isdigit() and int(declared) > limit
        chunks: list[bytes] = []
        size = 0
        more = True
        while more and not too_large:
            event = await receive()
            if event["type"] == "http.disconnect":
                return None
            chunk: bytes = event.get("body", b"")
            size += len(chunk)
            more = bool(event.get("more_body", False))
            if size > limit:
                too_large = True
            else:
                chunks.append(chunk)
        if too_large:
            # Read the rest without keeping it, so the client gets to read the answer.
            while more and size <= DRAIN_LIMIT_BYTES:
                event = await receive()
                if event["type"] == "http.disconnect":
                    return None
                size += len(event.get("body", b""))
                more = bool(event.get("more_body", False))
            await _json(send, 413, {"error": message, "limitBytes": limit}, close=more)
            return None
        return b"".join(chunks)

    async def _sign_in(self, scope: Scope, method: str, receive: Receive, send: Send) -> None:
        settings = self.settings
        if not settings.access_token:
            await _redirect(send, f"{settings.prefix}/")
            return
        error = ""
        if method == "POST":
            body = b""
            more = True
            while more:
                event = await receive()
                body += event.get("body", b"")
                more = bool(event.get("more_body", False))
            form = parse_qs(body.decode("utf-8", "replace"))
            token = (form.get("token") or [""])[0]
            csrf = (form.get("csrf") or [""])[0]
            if not hmac.compare_digest(csrf.encode(), settings.csrf_token.encode()):
                error = "The form expired: try again."
            elif hmac.compare_digest(token.encode(), settings.access_token.encode()):
                cookie = (
                    f"{_auth_cookie_name(scope)}={settings.auth_cookie_value()}; Path=/; "
                    "HttpOnly; SameSite=Strict"
                )
                if scope.get("scheme") == "https":
                    cookie += "; Secure"
                await _redirect(send, f"{settings.prefix}/", cookie=cookie)
                return
            else:
                error = "That token is not right."
        page = SIGN_IN_PAGE.format(
            action=html.escape(f"{settings.prefix}{SIGN_IN_PATH}"),
            csrf=html.escape(settings.csrf_token),
            stylesheet=html.escape(f"{settings.prefix}/assets/index.css"),
            error=f'<p class="error" role="alert">{html.escape(error)}</p>' if error else "",
        )
        await _respond(send, 401 if error else 200, page.encode(), b"text/html; charset=utf-8")


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · AI Agent</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="{stylesheet}"></head>
<body><main class="sign-in card">
<p class="eyebrow">AI Agent</p><h1>Sign in</h1>
<p class="hint">This app is shared beyond this machine. Enter the access token its
owner started it with (DEX_AGENT_ACCESS_TOKEN).</p>
<form method="post" action="{action}">
<input type="hidden" name="csrf" value="{csrf}">
<label>Access token <input name="token" type="password" autocomplete="current-password"
required autofocus></label>
{error}<button class="primary" type="submit">Sign in</button>
</form></main></body></html>
"""


def _reads_json(path: str, prefix: str) -> bool:
    """The routes that answer JSON or events (not the page, its assets or sign-in)."""
    rest = path.removeprefix(prefix)
    return rest not in ("", "/", SIGN_IN_PATH) and not rest.startswith("/assets/")


def _auth_cookie_name(scope: Scope) -> str:
    # Cookies ignore ports: one name per port keeps two apps on one host apart.
    server = scope.get("server") or ("", 0)
    return f"ai_agent_auth_{server[1] or 0}"


def _headers(scope: Scope) -> dict[str, str]:
    raw: Iterable[tuple[bytes, bytes]] = scope.get("headers", [])
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in raw}


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    cookies: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, separator, value = part.strip().partition("=")
        if separator:
            cookies[name] = value
    return cookies


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _with_security_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {key.lower() for key, _ in message.get("headers", [])}
            extra = [(key, value) for key, value in SECURITY_HEADERS if key not in present]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    *,
    extra: Iterable[tuple[bytes, bytes]] = (),
    close: bool = False,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *extra,
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, value: object, *, close: bool = False) -> None:
    await _respond(send, status, json.dumps(value).encode(), b"application/json", close=close)


async def _text(send: Send, status: int, text: str) -> None:
    await _respond(send, status, text.encode(), b"text/plain; charset=utf-8")


async def _redirect(send: Send, location: str, *, cookie: str | None = None) -> None:
    extra = [(b"location", location.encode())]
    if cookie:
        extra.append((b"set-cookie", cookie.encode()))
    await _respond(send, 303, b"", b"text/plain", extra=extra)
