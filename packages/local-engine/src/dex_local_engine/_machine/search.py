"""SearchFlows over the engine's own indexes, and the index configurations Workers sync.

Workers declare which Attributes are indexed (``SyncAttributeIndexes``); a query can
then name an Attribute's index key (its name unless the index sets another key)
next to the system fields. Every Flow the engine keeps is a candidate: running Flows
and the last run of each closed one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import indexes
from dex_local_engine._machine.state import EngineState, load_closed_attributes
from dex_local_engine._rules import errors
from dex_local_engine._rules.model import Flow
from dex_local_engine._rules.search_query import Order, QueryError, parse, sort_key
from dex_local_engine._rules.values import stamp

DEFAULT_PAGE_SIZE = 100
# ExecutionStatus values as the visibility store names them.
STATUS_NAMES: dict[int, str] = {
    pb.FLOW_STATUS_RUNNING: "Running",
    pb.FLOW_STATUS_COMPLETED: "Completed",
    pb.FLOW_STATUS_FAILED: "Failed",
    pb.FLOW_STATUS_CANCELED: "Canceled",
    pb.FLOW_STATUS_TERMINATED: "Terminated",
    pb.FLOW_STATUS_CONTINUED_AS_NEW: "ContinuedAsNew",
}


def sync_indexes(engine: EngineState, request: pb.SyncAttributeIndexRequest) -> None:
    """Remember the index keys a Worker declares (index key -> type), and store them.

    A declared key indexes the Attribute of the same name; an Attribute indexed under
    another key is learned from its writes (``indexes.note_write``).
    """
    if any(not key for key in request.attribute_indexes):
        raise errors.invalid("an Attribute index needs an index key")
    with engine.tx():
        for index_key, index_type in request.attribute_indexes.items():
            indexes.remember(engine, index_key, pb.IndexConfig(enable=True, type=index_type))


def search_flows(engine: EngineState, request: pb.SearchFlowsRequest) -> pb.SearchFlowsResponse:
    """One page of the Flows matching the query, newest start first unless ordered."""
    if request.page_size < 0:
        raise errors.invalid("page_size must not be negative")
    keys = _index_keys(engine)
    try:
        query = parse(request.query, lambda name: name if name in keys else None)
    except QueryError as error:
        raise errors.invalid(f"invalid search query {request.query!r}: {error}") from None
    try:
        offset = int(request.next_page_token or "0")
    except ValueError:
        raise errors.invalid(f"invalid next_page_token {request.next_page_token!r}") from None
    rows: list[tuple[Flow, dict[str, Any], list[pb.KV]]] = []
    for flow in engine.flows.values():
        indexed = _indexed_attributes(engine, flow, keys)
        record = _record(flow, indexed)
        if query.matches(record):
            rows.append((flow, record, indexed))
    order = query.order or (Order("StartTime", descending=True),)
    for term in reversed(order):
        key = sort_key(term)
        rows.sort(key=lambda row: key(row[1]), reverse=term.descending)
    size = request.page_size or DEFAULT_PAGE_SIZE
    page = rows[offset : offset + size]
    response = pb.SearchFlowsResponse()
    if offset + size < len(rows):
        response.next_page_token = str(offset + size)
    for flow, _, indexed in page:
        entry = response.flow_runs.add(
            flow_id=flow.flow_id,
            run_id=flow.run_id,
            flow_type=flow.flow_type,
            flow_status=cast(pb.FlowStatus, flow.status),
            indexed_attributes=indexed,
        )
        entry.start_time.CopyFrom(stamp(flow.start_time))
        if not flow.running:
            entry.close_time.CopyFrom(stamp(flow.close_time))
    return response


def _index_keys(engine: EngineState) -> dict[str, list[str]]:
    """Index key -> the Attribute keys indexed under it, for every enabled index.

    Several Attributes may share one index key, of one Flow type or of several, as
    they share one search attribute on Dex Server: each Flow's own Attribute gives the
    Flow its value for that key.
    """
    keys: dict[str, list[str]] = {}
    for attribute_key, config in engine.indexes.items():
        if config.enable:
            keys.setdefault(config.index_key or attribute_key, []).append(attribute_key)
    return keys


def _indexed_attributes(engine: EngineState, flow: Flow, keys: dict[str, list[str]]) -> list[pb.KV]:
    load_closed_attributes(engine, flow)
    indexed: list[pb.KV] = []
    for index_key, attribute_keys in keys.items():
        present = [key for key in attribute_keys if key in flow.attributes]
        if not present:
            continue
        if len(present) > 1:
            # A Flow with two Attributes under one key: the later in its Attribute order.
            order = {key: position for position, key in enumerate(flow.attributes)}
            present.sort(key=order.__getitem__)
        indexed.append(pb.KV(key=index_key, value=flow.attributes[present[-1]]))
    return indexed


def _record(flow: Flow, indexed: list[pb.KV]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "FlowId": flow.flow_id,
        "RunId": flow.run_id,
        "FlowType": flow.flow_type,
        "ExecutionStatus": STATUS_NAMES.get(flow.status, "Running"),
        "StartTime": datetime.fromtimestamp(flow.start_time, UTC),
        "CloseTime": None if flow.running else datetime.fromtimestamp(flow.close_time, UTC),
    }
    for kv in indexed:
        record[kv.key] = _plain(kv.value)
    return record


def _plain(value: pb.Value) -> Any:
    """A Value as a plain Python value for comparisons (a JSON list stays a list)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        text = value.string_value
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "obj_value":
        try:
            return json.loads(value.obj_value.payload)  # JSON lists are KEYWORD_ARRAY values
        except ValueError:
            return None
    return None
