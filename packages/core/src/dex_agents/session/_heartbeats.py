"""Heartbeats while a runner works, and the heartbeat checkpoint of tool Steps.

Dex fails an attempt that sends no heartbeat within its heartbeat timeout, and a
model or tool call can be silent for minutes. ``BackgroundHeartbeats`` sends one
every 20 seconds while the runner works. A heartbeat without a value clears the
persisted checkpoint, so once a checkpoint exists every heartbeat carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType

from dex import AsyncContext

__all__ = ["HEARTBEAT_INTERVAL_SECONDS", "BackgroundHeartbeats"]

_log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_SECONDS = 20.0


class BackgroundHeartbeats:
    """Async context manager: heartbeats every 20 s; also the checkpoint holder.

    ``checkpoint`` starts as the previous attempt's checkpoint, so a retry that
    saves nothing keeps it for the attempt after.
    """

    def __init__(
        self,
        context: AsyncContext,
        *,
        checkpoint: str | None = None,
        interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS,
    ) -> None:
        self._context = context
        self._interval = interval_seconds
        self._task: asyncio.Task[None] | None = None
        self.checkpoint = checkpoint

    async def beat(self) -> None:
        """Send one heartbeat now, carrying the checkpoint when there is one."""
        if self.checkpoint is None:
            await self._context.heartbeat()
        else:
            await self._context.heartbeat(self.checkpoint)

    async def save_checkpoint(self, text: str) -> None:
        """Record ``text`` as the checkpoint and send it with a heartbeat."""
        if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("a heartbeat checkpoint must be text")
        self.checkpoint = text
        await self.beat()

    async def __aenter__(self) -> BackgroundHeartbeats:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a lost heartbeat is retried on the next tick
                _log.debug("background heartbeat failed: %s", error)
