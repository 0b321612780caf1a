"""Every value the contract names has a golden fixture, and the session Flow uses it where the
contract says: each persistence name with its kind and value, each RPC with its input
fields and output, each Step with its input.

The tables below are the TypeScript 0.2.0 README's, transcribed: its persistence table
(name, kind, value), its RPC table (name, input fields, output), its Step table (inputs),
and its "Session settings" section (``SessionSettings``, ``TurnSessionSettings`` and
``update_session_settings``, which the tables leave out). The event table is checked
against real sessions by ``session/test_session_event_payloads.py``. With
``DEX_AGENTS_SPEC_README`` naming that README, ``test_the_tables_here_are_the_readme_s``
also parses the README's tables and compares them with these.
"""

from __future__ import annotations

import json
import os
import re
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from dex import Attribute, AttributeMap, Channel, ChannelMap, Stream, WireKind

from dex_agents import AgentSessionFlow, create_agent_session_flow, session_codec_registry

FIXTURES = Path(__file__).parent / "fixtures" / "wire"
SPEC_README_VARIABLE = "DEX_AGENTS_SPEC_README"

SPEC_PERSISTENCE: dict[str, tuple[str, str]] = {
    # persistence table: name -> (kind, value)
    "AgentState": ("Attribute", "AgentState"),
    "AgentMessages": ("AttributeMap", "AgentMessage"),
    "AgentMessageChunks": ("AttributeMap", "AgentMessageChunk"),
    "AgentMessageIndex": ("Attribute", "AgentMessageIndex"),
    "TurnReplySequence": ("Attribute", "TurnReplySequence"),
    "FrameworkRunState": ("Attribute", "string"),
    "AgentToolCalls": ("AttributeMap", "AgentToolCallRecord"),
    "PendingInterrupts": ("Attribute", "AgentInterrupt[]"),
    "AgentUsage": ("Attribute", "AgentUsage"),
    "QueuedUserMessages": ("Channel", "AgentUserMessage"),
    "InterruptResolutions": ("ChannelMap", "AgentInterruptResolution"),
    "ToolCallResults": ("Channel", "ToolCallCompleted"),
    "SteeredUserMessages": ("Channel", "AgentUserMessage"),
    "TurnControlRequests": ("Channel", "TurnControlRequest"),
    "TurnCancellationRequest": ("Attribute", "TurnCancellationRequest"),
    "ToolCallCancellations": ("ChannelMap", "ToolCallCancellation"),
    "AgentTraceContext": ("Attribute", "string"),
    "AgentPlan": ("Attribute", "AgentPlan"),
    "PlanExecutions": ("ChannelMap", "PlanExecutionRequest"),
    "PendingPlanExecution": ("Attribute", "PlanExecutionRequest"),
    "ContextSummary": ("Attribute", "ContextSummary"),
    "AgentEvents": ("Stream", "AgentEvent"),
}
SESSION_SETTINGS_PERSISTENCE: dict[str, tuple[str, str]] = {
    # "Session settings": the settings object, and the copy a turn started with
    "SessionSettings": ("Attribute", "SessionSettings"),
    "TurnSessionSettings": ("Attribute", "TurnSessionSettings"),
}
SPEC_RPCS: dict[str, tuple[frozenset[str] | None, str | frozenset[str]]] = {
    # RPC table: name -> (input fields, or None for none; "boolean", or the output fields)
    "send_user_message": (frozenset({"text", "plan_mode"}), "boolean"),
    "execute_plan": (frozenset({"revision"}), "boolean"),
    "steer_user_message": (frozenset({"message_id", "text"}), "boolean"),
    "delete_queued_message": (frozenset({"message_id"}), "boolean"),
    "cancel_turn": (frozenset({"turn_id"}), "boolean"),
    "resolve_interrupt": (frozenset({"interrupt_id", "approved", "rejection_message"}), "boolean"),
    "answer_question": (frozenset({"interrupt_id", "answer"}), "boolean"),
    "get_agent_snapshot": (
        None,
        frozenset(
            {
                "state",
                "messages",
                "pending_interrupts",
                "tool_calls",
                "usage",
                "queued_message_count",
                "plan",
                "queued_messages",
                "steered_messages",
                "context_summary",
            }
        ),
    ),
    "list_agent_messages": (
        frozenset({"before_sequence", "limit"}),
        frozenset({"messages", "next_before_sequence", "deleted_before_sequence"}),
    ),
}
SESSION_SETTINGS_RPCS: dict[str, tuple[frozenset[str] | None, str | frozenset[str]]] = {
    # "Session settings": updateSessionSettings(..., { sessionSettings }), false before init
    "update_session_settings": (frozenset({"session_settings"}), "boolean"),
}
SNAPSHOT_SESSION_SETTINGS = "session_settings"
"""``AgentSnapshot.sessionSettings`` ("Session settings"), beside the RPC table's fields."""
SPEC_STEP_INPUTS: dict[str, str] = {
    # Step table: Step type -> input
    "StartAgentSession": "AgentSessionStartInput",
    "AwaitUserMessage": "none",
    "RunModel": "none",
    "CompactContext": "CompactContextInput",
    "AwaitToolApproval": "tool call ID",
    "AwaitQuestionAnswer": "tool call ID",
    "AwaitTimer": "tool call ID",
    "CallTool": "tool call ID",
    "CallSingleAttemptTool": "tool call ID",
    "PollToolTask": "tool call ID",
    "RecordToolFailure": "tool call ID",
    "RecordToolOutcomeUnknown": "tool call ID",
    "ResumeTurn": "expected result count",
    "ApplyTurnControl": "none",
    "RecordTurnFailure": "the failing Step's input, ignored",
    "FinishTurnCancellation": "turn ID",
    "CancelToolTask": "tool call ID",
}
FIXTURE_OF_SPEC_VALUE = {
    "AgentToolCallRecord": "AgentToolCall",
    "AgentInterrupt[]": "PendingInterrupts",
}
"""Fixture names of the README's value names where Python's differ: ``AgentToolCallRecord``
is ``AgentToolCall`` (one class for runner and stored records), and ``PendingInterrupts``
holds the ``AgentInterrupt[]`` array."""
NESTED_VALUES = {"AgentMessageChunkRange", "PlanTask", "QueuedUserMessage"}
"""Values only inside others: the index's chunk ranges, a plan's tasks, the snapshot's
queued and steered messages."""
DEX_KINDS = {
    "Attribute": Attribute,
    "AttributeMap": AttributeMap,
    "Channel": Channel,
    "ChannelMap": ChannelMap,
    "Stream": Stream,
}
STEP_INPUT_TYPES: dict[str, object] = {
    "none": type(None),
    "tool call ID": str,
    "turn ID": str,
    "expected result count": int,
    "the failing Step's input, ignored": type(None),
}


class _Runner:
    def build_user_message(self, text: str) -> Any:
        raise NotImplementedError

    async def run_model_step(self, turn: Any) -> Any:
        raise NotImplementedError

    async def execute_deferred_tool_call(self, call: Any) -> Any:
        raise NotImplementedError


@pytest.fixture(scope="module")
def flow() -> AgentSessionFlow:
    return create_agent_session_flow(_Runner(), "WireSpecCoverage")


def _fixture_types() -> set[str]:
    return {path.stem for path in FIXTURES.glob("*.json")}


def _fixture_name(spec_value: str) -> str:
    return FIXTURE_OF_SPEC_VALUE.get(spec_value, spec_value)


def _spec_value_types() -> set[str]:
    """Every value the README names, as fixture names."""
    names = {
        _fixture_name(value)
        for _, value in (SPEC_PERSISTENCE | SESSION_SETTINGS_PERSISTENCE).values()
        if value != "string"
    }
    names |= {  # the element of an array value, such as AgentInterrupt of AgentInterrupt[]
        value.removesuffix("[]") for _, value in SPEC_PERSISTENCE.values() if value.endswith("[]")
    }
    names |= {value for value in SPEC_STEP_INPUTS.values() if value[0].isupper()}
    return names | NESTED_VALUES


def _rpc_methods(flow: AgentSessionFlow) -> dict[str, Any]:
    methods: dict[str, Any] = {}
    for name in dir(type(flow)):
        method = getattr(type(flow), name, None)
        options = getattr(method, "__dex_rpc_options__", None)
        if options is not None:
            methods[options.name or name] = method
    return methods


def _field_names(cls: object) -> frozenset[str]:
    assert isinstance(cls, type)
    assert is_dataclass(cls), cls
    return frozenset(field.name for field in fields(cls))


def test_every_value_the_contract_names_has_a_golden_fixture() -> None:
    rpc_values = {"AgentUserMessage", "AgentSnapshot", "ListAgentMessagesOutput"}
    rpc_values |= {
        f"{''.join(part.title() for part in name.split('_'))}Input"
        for name in SPEC_RPCS | SESSION_SETTINGS_RPCS
        if name not in ("send_user_message", "get_agent_snapshot")
    }
    missing = (_spec_value_types() | rpc_values) - _fixture_types()
    assert not missing, f"values of the contract without a golden fixture: {sorted(missing)}"
    # And no fixture for a value the contract does not name.
    assert _fixture_types() - _spec_value_types() - rpc_values == set()


def test_the_flow_persists_each_name_with_its_kind_and_value(flow: AgentSessionFlow) -> None:
    schema = flow.get_persistence_schema()
    definitions = {d.name: d for d in (*schema.attributes, *schema.channels, *schema.streams)}
    expected = SPEC_PERSISTENCE | SESSION_SETTINGS_PERSISTENCE
    assert set(definitions) == set(expected)
    registry = session_codec_registry()
    fixtures = _fixture_types()
    for name, (kind, value) in expected.items():
        definition = definitions[name]
        assert type(definition) is DEX_KINDS[kind], name
        codec = registry.resolve(definition.value_type)
        if value == "string":
            assert definition.value_type is str, name
            assert codec.wire_kind is WireKind.STRING, name
            continue
        fixture = _fixture_name(value)
        assert fixture in fixtures, name
        assert codec.wire_kind is WireKind.JSON, name
        document = json.loads((FIXTURES / f"{fixture}.json").read_text(encoding="utf-8"))
        for case in document["cases"]:
            # The codec this Flow stores the value with writes the fixture's JSON.
            stored = codec.encode(codec.decode(_json_value(case["wire"])))
            assert json.loads(stored.data) == case["encoded"], (name, case["name"])


def _json_value(data: Any) -> Any:
    from dex import Value

    return Value(WireKind.JSON, json.dumps(data))


def test_each_rpc_takes_and_returns_the_contract_s_fields(flow: AgentSessionFlow) -> None:
    methods = _rpc_methods(flow)
    expected = SPEC_RPCS | SESSION_SETTINGS_RPCS
    assert set(methods) == set(expected)
    fixtures = _fixture_types()
    for name, (input_fields, output) in expected.items():
        hints = typing.get_type_hints(methods[name])
        if input_fields is None:
            assert "input" not in hints, name
        else:
            assert _field_names(hints["input"]) == input_fields, name
            assert hints["input"].__name__ in fixtures, name
        (returned,) = get_args(hints["return"])
        if output == "boolean":
            assert returned is bool, name
            continue
        assert returned.__name__ in fixtures, name
        extra = {SNAPSHOT_SESSION_SETTINGS} if name == "get_agent_snapshot" else set()
        assert _field_names(returned) == output | extra, name


def test_each_step_takes_the_contract_s_input(flow: AgentSessionFlow) -> None:
    steps = {type(d.step).__name__: d.step for d in flow.get_steps()}
    assert set(steps) == set(SPEC_STEP_INPUTS)
    fixtures = _fixture_types()
    for name, spec_input in SPEC_STEP_INPUTS.items():
        hint = typing.get_type_hints(type(steps[name]).execute)["input"]
        if spec_input[0].isupper():
            assert hint.__name__ == spec_input, name
            assert spec_input in fixtures, name
        else:
            assert hint is STEP_INPUT_TYPES[spec_input], name


def test_cancellation_reasons_are_the_contract_s_and_one_python_extension() -> None:
    from dex_agents import AgentSessionOptions
    from dex_agents.session._question_supersession import SUPERSEDED_BY_USER_INPUT
    from dex_agents.session._turn_control_rules import CancellationReason
    from dex_agents.values import ToolCallCancellation

    contract = {"steered", "turn_cancelled"}
    assert set(get_args(CancellationReason)) == contract
    hint = typing.get_type_hints(ToolCallCancellation)["reason"]
    assert get_origin(hint) is typing.Literal
    assert set(get_args(hint)) == contract
    # The one reason outside the TypeScript union is opt-in (documented in the README).
    assert SUPERSEDED_BY_USER_INPUT not in contract
    assert AgentSessionOptions().question_supersedes_later_calls is False
    document = json.loads((FIXTURES / "AgentToolCall.json").read_text(encoding="utf-8"))
    reasons = {case["wire"].get("cancellation_reason") for case in document["cases"]} - {None}
    assert reasons == contract | {SUPERSEDED_BY_USER_INPUT}


# --- the tables above against the README's text ------------------------------------------


def _table(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == header)
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _first_name(cell: str) -> str:
    match = re.search(r"`([A-Z][A-Za-z]+(?:\[\])?)", cell)
    return match.group(1) if match else cell.split()[0].strip(",;")


def _braced_fields(cell: str) -> frozenset[str] | None:
    match = re.search(r"`\{([^}]*)\}`", cell)
    if match is None:
        return None
    return frozenset(part.strip() for part in match.group(1).split(",") if part.strip())


@pytest.mark.skipif(
    not os.environ.get(SPEC_README_VARIABLE),
    reason=f"{SPEC_README_VARIABLE} does not name the TypeScript 0.2.0 README",
)
def test_the_tables_here_are_the_readme_s() -> None:
    text = Path(os.environ[SPEC_README_VARIABLE]).read_text(encoding="utf-8")
    persistence = {
        row[0].strip("`"): (row[1].split(",")[0].strip(), _first_name(row[2]))
        for row in _table(text, "| Persistence name | Kind | Value |")
    }
    assert persistence == SPEC_PERSISTENCE
    rpcs: dict[str, tuple[frozenset[str] | None, str | frozenset[str]]] = {}
    for name, input_cell, output_cell in _table(text, "| RPC | Input | Output |"):
        output = _braced_fields(output_cell) if output_cell.startswith("`{") else "boolean"
        rpcs[name.strip("`")] = (_braced_fields(input_cell), output or "boolean")
    assert rpcs == SPEC_RPCS
    steps = {
        row[0].strip("`"): row[1].strip("`")
        for row in _table(text, "| Step type | Input | Behavior | Options |")
    }
    assert steps == SPEC_STEP_INPUTS
    events: dict[str, frozenset[str]] = {}
    for type_cell, payload_cell in _table(text, "| Event type | Payload |"):
        braces = re.search(r"`(\{[^`]*\})`", payload_cell)
        assert braces is not None, type_cell
        for event_type in re.findall(r"`([a-z_]+)`", type_cell):
            events[event_type] = frozenset(re.findall(r'"(\w+)"', braces.group(1)))
    fixture = json.loads((FIXTURES / "AgentEvent.json").read_text(encoding="utf-8"))
    for case in fixture["cases"]:
        event_type = case["wire"]["type"]
        if "." not in event_type:
            assert frozenset(json.loads(case["wire"]["payload"])) == events[event_type]
    assert {c["wire"]["type"] for c in fixture["cases"]} >= set(events)
