"""SearchFlows through the real SDK: indexed Attributes, system fields, order, pages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import search_app as app
from conftest import running_flows
from dex import (
    Client,
    DexServiceError,
    FlowStatus,
    StepExecutionId,
    WaitForStepCompletionOptions,
)

from dex_local_engine import LocalEngine


@pytest.fixture
def client(engine: LocalEngine, cache_dir: str) -> Iterator[Client]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        made, flow = running.client, running.flows[0]
        for number in range(1, 7):
            made.start_flow(flow, f"order-{number}", number)
        for number in range(1, 7):
            made.wait_for_step_completion(
                f"order-{number}",
                StepExecutionId("Index", 1),
                WaitForStepCompletionOptions(request_timeout=timedelta(seconds=30)),
            )
        yield made


def _ids(client: Client, query: str, page_size: int = 100) -> list[str]:
    return [entry.flow_id for entry in client.search_flows(query, page_size).flows]


def test_indexed_keyword_finds_the_flow_with_its_indexed_attributes(client: Client) -> None:
    (entry,) = client.search_flows("OrderLabel = 'order-3'", 10).flows
    assert entry.flow_id == "order-3"
    assert entry.run_id == client.describe_flow("order-3").run_id
    assert entry.flow_type == "OrderFlow"
    assert entry.status is FlowStatus.COMPLETED
    assert entry.started_at is not None
    assert entry.closed_at is not None
    assert entry.indexed_attributes["OrderLabel"].data == "order-3"
    assert entry.indexed_attributes["OrderAmount"].data == 3


def test_flows_of_two_types_share_one_custom_keyword_field(
    engine: LocalEngine, cache_dir: str
) -> None:
    # As on Dex Server, the index key is one search attribute: a Flow whose Attribute
    # is indexed under it is found by it, whichever Attribute of which Flow type set it.
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        made, cases, claims = running.client, running.flows[1], running.flows[2]
        made.start_flow(cases, "case-1", "open")
        made.start_flow(claims, "claim-1", "open")
        made.start_flow(claims, "claim-2", "settled")
        for flow_id, step_type in (
            ("case-1", "OpenCase"),
            ("claim-1", "OpenClaim"),
            ("claim-2", "OpenClaim"),
        ):
            made.wait_for_step_completion(
                flow_id,
                StepExecutionId(step_type, 1),
                WaitForStepCompletionOptions(request_timeout=timedelta(seconds=30)),
            )
        assert sorted(_ids(made, "CaseStatus = 'open'")) == ["case-1", "claim-1"]
        (settled,) = made.search_flows("CaseStatus = 'settled'", 10).flows
        assert settled.flow_id == "claim-2"
        assert settled.indexed_attributes["CaseStatus"].data == "settled"
        assert _ids(made, "CaseStatus = 'open' AND FlowType = 'ClaimFlow'") == ["claim-1"]


def test_renamed_index_key_system_fields_and_order(client: Client) -> None:
    assert _ids(client, "OrderAmount >= 4 ORDER BY OrderAmount") == [
        "order-4",
        "order-5",
        "order-6",
    ]
    assert _ids(client, "ExecutionStatus = 'Running' ORDER BY FlowId DESC") == [
        "order-6",
        "order-4",
        "order-2",
    ]
    assert _ids(client, "FlowType = 'OrderFlow' AND OrderAmount IN (1, 2) ORDER BY FlowId") == [
        "order-1",
        "order-2",
    ]
    # An index key is the query name; the Attribute's own name is not.
    with pytest.raises(DexServiceError, match="unknown search field 'amount'"):
        client.search_flows("amount = 3", 10)


def test_pages_follow_the_token(client: Client) -> None:
    seen: list[str] = []
    token = ""
    while True:
        page = client.search_flows("ORDER BY OrderAmount DESC", 4, token)
        seen += [entry.flow_id for entry in page.flows]
        if not page.next_page_token:
            break
        token = page.next_page_token
    assert seen == [f"order-{number}" for number in range(6, 0, -1)]


def test_bad_queries_are_invalid_arguments(client: Client) -> None:
    with pytest.raises(DexServiceError, match="invalid search query"):
        client.search_flows("OrderLabel = ", 10)
    with pytest.raises(ValueError, match="negative"):
        client.search_flows("", -1)
