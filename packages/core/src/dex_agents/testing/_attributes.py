"""A Flow's stored Attributes, read from the engine's ``GetAttributes``.

The Dex Python Client has no Attribute read, so this reads the raw FlowService.
Tests use it to see where messages live (window, chunks, index) and benchmarks to
measure a session's stored bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2, dex_pb2_grpc

from dex_agents._host_auth import bearer_metadata

__all__ = ["read_stored_attributes", "stored_attribute_bytes"]


async def read_stored_attributes(
    server_address: str, flow_id: str, *, token: str | None = None
) -> dict[str, Any]:
    """Every stored Attribute of ``flow_id`` by its stored key (``Name`` or ``Name/instance``),
    as the engine's ``Value`` message. ``token`` is the bearer token of a server that
    requires one (default: ``DEX_SERVER_TOKEN`` when set)."""
    if not flow_id:
        raise ValueError("flow_id must not be empty")
    metadata = bearer_metadata(token)
    async with grpc.aio.insecure_channel(server_address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        get_attributes = cast(
            Callable[..., Awaitable[dex_pb2.GetAttributesResponse]], stub.GetAttributes
        )
        response = await get_attributes(
            dex_pb2.GetAttributesRequest(flow_id=flow_id, all_keys=True), metadata=metadata
        )
    return {entry.key: entry.value for entry in response.attributes}


def stored_attribute_bytes(attributes: dict[str, Any]) -> int:
    """Total serialized bytes of ``attributes``, keys included."""
    return sum(len(key) + value.ByteSize() for key, value in attributes.items())
