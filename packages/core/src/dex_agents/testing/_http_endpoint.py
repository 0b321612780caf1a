"""A scripted HTTP endpoint on loopback, for clients that open their own connections.

Some model clients (LiteLLM's) build their HTTP clients themselves, so a test cannot
hand them a mock transport; it points them at ``ScriptedHttpEndpoint.url`` instead.
The endpoint answers each request with the next scripted ``HttpAnswer`` and records
what it got. It binds ``127.0.0.1`` only, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = [
    "HttpAnswer",
    "RecordedRequest",
    "ScriptedHttpEndpoint",
    "chat_completion_chunk",
    "loopback_only",
    "sse_body",
]

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", b"127.0.0.1", b"localhost")


@dataclass(frozen=True)
class HttpAnswer:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"

    @classmethod
    def json(cls, value: Any, status: int = 200) -> HttpAnswer:
        return cls(status, json.dumps(value).encode())

    @classmethod
    def event_stream(cls, events: Iterable[Any]) -> HttpAnswer:
        return cls(200, sse_body(events), "text/event-stream")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the endpoint received: method, path, headers and body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body, parsed as JSON."""
        return json.loads(self.body)


def sse_body(events: Iterable[Any], *, done: bool = True) -> bytes:
    """Server-sent events, one ``data:`` line of JSON each, ending with ``[DONE]``."""
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def chat_completion_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "served-model",
    chunk_id: str = "chatcmpl-1",
) -> dict[str, Any]:
    """One streamed Chat Completions chunk: choice 0 with ``delta`` and ``finish_reason``,
    or no choice at all (a usage chunk) when neither is given."""
    choices = (
        [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
        if delta is not None or finish_reason is not None
        else []
    )
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": 1764400000,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


@dataclass
class ScriptedHttpEndpoint:
    """Answers requests in order from ``answers``; a request past the script gets a 599."""

    answers: list[HttpAnswer] = field(default_factory=list[HttpAnswer])
    requests: list[RecordedRequest] = field(default_factory=list[RecordedRequest])
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without a trailing slash."""
        if self._server is None:
            raise RuntimeError("the endpoint is not started; use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                endpoint.answer(self)

            def do_GET(self) -> None:
                endpoint.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # Quiet: the recorded requests are the log.

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    handler.command,
                    handler.path,
                    {name.lower(): value for name, value in handler.headers.items()},
                    body,
                )
            )
            answer = (
                self.answers.pop(0)
                if self.answers
                else HttpAnswer.json({"error": {"message": "no scripted answer left"}}, 599)
            )
        handler.send_response(answer.status)
        handler.send_header("content-type", answer.content_type)
        handler.send_header("content-length", str(len(answer.body)))
        handler.end_headers()
        handler.wfile.write(answer.body)


@contextmanager
def loopback_only() -> Generator[None]:
    """Refuse every name lookup but loopback's while inside, and fail on leaving if one
    was tried: a library that catches a failed download and goes on (LiteLLM does)
    would otherwise hide it."""
    resolve = socket.getaddrinfo
    attempts: list[object] = []

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in _LOOPBACK_HOSTS:
            attempts.append(host)
            raise OSError(f"only loopback may be reached here, not {host!r}")
        return resolve(host, *args, **kwargs)

    socket.getaddrinfo = guarded
    try:
        yield
    finally:
        socket.getaddrinfo = resolve
    if attempts:
        raise AssertionError(f"tried to reach the network: {attempts}")
