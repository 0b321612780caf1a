"""Free loopback ports for private engines and listeners in tests."""

from __future__ import annotations

import socket
from contextlib import ExitStack

LOOPBACK_HOST = "127.0.0.1"


def find_free_loopback_ports(count: int) -> list[int]:
    """Return ``count`` distinct ports that were free on 127.0.0.1 a moment ago.

    Every probe listener stays open until all ports are picked, so the operating
    system never hands the same port out twice in one call. Another process can
    still take a port before the caller binds it; prefer port 0 where a server
    reports the port it bound.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    with ExitStack() as listeners:
        ports: list[int] = []
        for _ in range(count):
            listener = listeners.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            listener.bind((LOOPBACK_HOST, 0))
            listener.listen(1)
            ports.append(int(listener.getsockname()[1]))
        return ports
