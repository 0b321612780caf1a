"""Why a Flow closed, as Dex reports it: a terminate's reason is the error message of
the close event in the Flow's history (``WaitForFlow``'s result carries none), so the
banner of a terminated Agent can show it."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2, dex_pb2_grpc

_PAGE_SIZE = 1_000
_LOG = logging.getLogger(__name__)

GetHistoryEvents = Callable[..., Awaitable[dex_pb2.GetHistoryEventsResponse]]
TOKEN_VARIABLE = "DEX_SERVER_TOKEN"
"""The bearer token of a server that requires one, as ``AgentHost`` reads it."""


async def read_close_reason(server_address: str, flow_id: str) -> str:
    """The error message of the Flow's close event; empty when there is none or the
    history cannot be read (the page then shows its default text). The call carries
    ``DEX_SERVER_TOKEN`` when set, as the host's own calls do."""
    try:
        async with grpc.aio.insecure_channel(server_address) as channel:
            stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            return await _close_message(cast("GetHistoryEvents", stub.GetHistoryEvents), flow_id)
    except grpc.RpcError as error:
        _LOG.warning("cannot read the history of Flow %s: %s", flow_id, error)
        return ""


async def _close_message(get_history_events: GetHistoryEvents, flow_id: str) -> str:
    message = ""
    page_token = b""
    while True:
        request = dex_pb2.GetHistoryEventsRequest(
            flow_id=flow_id, estimate_page_size=_PAGE_SIZE, next_page_token=page_token
        )
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        response = await get_history_events(request, metadata=metadata)
        for event in response.events:
            if event.WhichOneof("payload") == "flow_closed":
                message = event.flow_closed.error_message
        if not response.next_page_token:
            return message
        page_token = response.next_page_token
