"""Deadline polling for conditions that the Dex Client cannot wait on directly."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

T = TypeVar("T")

DEFAULT_POLL_TIMEOUT = timedelta(seconds=60)
DEFAULT_POLL_INTERVAL = timedelta(milliseconds=50)


class PollTimeoutError(TimeoutError):
    """A polled condition did not hold before the deadline."""

    __module__ = "dex_agents.testing"  # the public import path, as tracebacks show it


def _is_done(value: object) -> bool:
    return value is not None and value is not False


async def poll_until(
    probe: Callable[[], Awaitable[T | None] | T | None],
    *,
    description: str,
    within: timedelta = DEFAULT_POLL_TIMEOUT,
    interval: timedelta = DEFAULT_POLL_INTERVAL,
) -> T:
    """Call ``probe`` until it returns something other than ``None`` or ``False``.

    ``probe`` may be a plain or an ``async`` function. The first such value is
    returned. When ``within`` passes first, ``PollTimeoutError`` names
    ``description`` and the last value seen, so a failing test says what it waited for.
    """
    if within <= timedelta(0) or interval <= timedelta(0):
        raise ValueError("within and interval must be positive")
    deadline = time.monotonic() + within.total_seconds()
    last: object = None
    while True:
        result = probe()
        value = await result if inspect.isawaitable(result) else result
        if _is_done(value):
            return value  # type: ignore[return-value]
        last = value
        if time.monotonic() >= deadline:
            raise PollTimeoutError(
                f"timed out after {within.total_seconds():g}s waiting for {description}"
                f" (last probe result: {last!r})"
            )
        await asyncio.sleep(interval.total_seconds())


def poll_until_sync(
    probe: Callable[[], T | None],
    *,
    description: str,
    within: timedelta = DEFAULT_POLL_TIMEOUT,
    interval: timedelta = DEFAULT_POLL_INTERVAL,
) -> T:
    """The blocking twin of :func:`poll_until`, for code without an event loop."""
    if within <= timedelta(0) or interval <= timedelta(0):
        raise ValueError("within and interval must be positive")
    deadline = time.monotonic() + within.total_seconds()
    while True:
        value = probe()
        if _is_done(value):
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise PollTimeoutError(
                f"timed out after {within.total_seconds():g}s waiting for {description}"
                f" (last probe result: {value!r})"
            )
        time.sleep(interval.total_seconds())
