"""The SearchFlows query language on plain records."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from dex_local_engine._rules.search_query import Order, QueryError, parse

FIELDS = {"Color", "Size", "Tags", "Due"}
RECORDS: list[dict[str, Any]] = [
    {
        "FlowId": "a",
        "FlowType": "Order",
        "ExecutionStatus": "Running",
        "Color": "red",
        "Size": 3,
        "Tags": ["x", "y"],
        "Due": datetime(2026, 1, 2, tzinfo=UTC),
    },
    {
        "FlowId": "b",
        "FlowType": "Order",
        "ExecutionStatus": "Completed",
        "Color": "blue",
        "Size": 10,
        "Tags": ["y"],
    },
    {"FlowId": "c", "FlowType": "Invoice", "ExecutionStatus": "Completed", "Size": 7.5},
]


def ids(text: str) -> list[str]:
    query = parse(text, lambda name: name if name in FIELDS else None)
    return [record["FlowId"] for record in RECORDS if query.matches(record)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["a", "b", "c"]),
        ("Color = 'red'", ["a"]),
        ("Color != 'red'", ["b"]),
        ("WorkflowType = 'Order' AND Size > 5", ["b"]),
        ("FlowType = 'Invoice' OR Color = \"red\"", ["a", "c"]),
        ("NOT (ExecutionStatus = 'Completed')", ["a"]),
        ("Size BETWEEN 3 AND 7.5", ["a", "c"]),
        ("Size >= 7.5 and Size < 10", ["c"]),
        ("FlowId IN ('a', 'c', 'z')", ["a", "c"]),
        ("FlowId NOT IN ('a')", ["b", "c"]),
        ("Color STARTS_WITH 'bl'", ["b"]),
        ("Color IS NULL", ["c"]),
        ("Color IS NOT NULL", ["a", "b"]),
        ("Tags = 'x'", ["a"]),
        ("Tags = 'y'", ["a", "b"]),
        ("Due > '2026-01-01T00:00:00Z'", ["a"]),
        ("Due < '2026-01-01'", []),
        ("Color = 3", []),
    ],
)
def test_queries_match_as_the_visibility_language_says(text: str, expected: list[str]) -> None:
    assert ids(text) == expected


def test_order_by_terms_are_parsed() -> None:
    query = parse("Color = 'red' ORDER BY Size DESC, FlowId", lambda name: name)
    assert query.order == (Order("Size", descending=True), Order("FlowId", descending=False))
    assert parse("ORDER BY StartTime", lambda name: None).order == (Order("StartTime", False),)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Weight = 3", "unknown search field 'Weight'"),
        ("Color = ", "ends too early"),
        ("Color 'red'", "unexpected \"'red'\" after Color"),
        ("(Color = 'red'", "expected ')'"),
        ("Color = 'red' extra", "unexpected 'extra'"),
        ("Color = 'red' ORDER Size", "expected BY"),
        ("Size BETWEEN 1 OR 2", "expected AND"),
        ("Color = 'red' $", "unexpected text"),
    ],
)
def test_bad_queries_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(QueryError, match=re.escape(problem)):
        ids(text)
