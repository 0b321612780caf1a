"""The WorkerTaskService pull Workers call: one PollWorkerTask stream per slot."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine._workers.dispatch import Dispatcher

_LOG = logging.getLogger("dex_local_engine.service")


class WorkerTaskService(cast(Any, pb_grpc).WorkerTaskServiceServicer):
    """The WorkerTaskService pull Workers call: one PollWorkerTask stream per slot."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def PollWorkerTask(self, request_iterator: Any, context: Any) -> None:
        """PollWorkerTask: serve one pull stream until it ends."""
        try:
            await self.dispatcher.serve_stream(context)
        except asyncio.CancelledError:
            raise
        except Exception:
            _LOG.exception("Worker task stream failed")
