"""Golden wire fixtures: values in the shapes the contract documents for the TypeScript
package (0.1.0 shapes with missing fields, 0.2.0 shapes, nulls meaning defaults, fields
a newer writer added) decode here and re-encode to the contract's JSON.

Each file under ``fixtures/wire`` names its source. ``wire`` is what a writer stored;
``encoded`` is the JSON this core writes back for it, which must decode to the same
value again (both directions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dex import Value, WireKind

import dex_agents.values as values
from dex_agents import session_codec_registry
from dex_agents._wire import unknown_fields
from dex_agents.values import from_wire, to_wire

FIXTURES = Path(__file__).parent / "fixtures" / "wire"
CASES = [
    pytest.param(document["type"], case, id=f"{path.stem}: {case['name']}")
    for path in sorted(FIXTURES.glob("*.json"))
    for document in [json.loads(path.read_text(encoding="utf-8"))]
    for case in document["cases"]
]


def test_every_fixture_names_its_source() -> None:
    for path in FIXTURES.glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["source"], path.name
        assert document["cases"], path.name


@pytest.mark.parametrize(("type_name", "case"), CASES)
def test_fixture_decodes_and_reencodes_to_the_contract_json(
    type_name: str, case: dict[str, Any]
) -> None:
    cls = getattr(values, type_name)
    decoded = from_wire(cls, case["wire"])
    assert to_wire(decoded) == case["encoded"]
    # The other direction: what this core writes decodes to the same value.
    again = from_wire(cls, case["encoded"])
    assert again == decoded
    assert to_wire(again) == case["encoded"]


@pytest.mark.parametrize(("type_name", "case"), CASES)
def test_the_session_codecs_agree_with_the_fixtures(type_name: str, case: dict[str, Any]) -> None:
    codec = session_codec_registry().resolve(getattr(values, type_name))
    decoded = codec.decode(Value(WireKind.JSON, json.dumps(case["wire"])))
    assert json.loads(codec.encode(decoded).data) == case["encoded"]


def test_unknown_fields_are_kept_through_a_round_trip() -> None:
    stored = {"text": "hi", "plan_mode": False, "sent_from": {"app": "web"}}
    message = from_wire(values.AgentUserMessage, stored)
    assert unknown_fields(message) == {"sent_from": {"app": "web"}}
    assert to_wire(message) == stored
    # A value this core builds itself has none.
    assert unknown_fields(values.AgentUserMessage(text="hi")) == {}


def test_event_payloads_are_json_objects() -> None:
    document = json.loads((FIXTURES / "AgentEvent.json").read_text(encoding="utf-8"))
    for case in document["cases"]:
        event = from_wire(values.AgentEvent, case["wire"])
        assert isinstance(json.loads(event.payload), dict)
