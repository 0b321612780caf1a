"""Golden wire fixtures: every persisted and RPC value of the contract, in the shapes the
TypeScript 0.2.0 README documents (its field tables and types), decodes here and encodes
back to the contract's JSON, in both directions.

Each file under ``fixtures/wire`` names its source in the README. A case's ``wire`` is
what a writer (either core) stores; ``encoded`` is the JSON this core writes back for
it. The fixtures are written from the README, never from this core's output: 0.1.0
shapes with fields missing, nulls that mean a default, a field a newer writer added,
and a case for each 0.2.0 shape. ``BUILT`` holds a Python value for one case of every
type, constructed here, which must encode to that case's JSON and decode back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from dex import CodecRegistry, Value, WireKind

import dex_agents.values as values
from dex_agents import session_codec_registry
from dex_agents._wire import unknown_fields
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    AgentPlan,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    AgentUserMessage,
    AnswerQuestionInput,
    CancelTurnInput,
    CompactContextInput,
    ContextSummary,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    InteractionMode,
    InterruptKind,
    ListAgentMessagesInput,
    ListAgentMessagesOutput,
    PlanExecutionRequest,
    PlanTask,
    QueuedUserMessage,
    ResolveInterruptInput,
    SessionSettingsValue,
    SteerUserMessageInput,
    ToolCallCancellation,
    ToolCallCompleted,
    ToolEffect,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
    UpdateSessionSettingsInput,
    decode_session_settings,
    encode_session_settings,
    from_wire,
    to_wire,
)

FIXTURES = Path(__file__).parent / "fixtures" / "wire"


def _documents() -> dict[str, dict[str, Any]]:
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(FIXTURES.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["type"] == path.stem, path.name
        documents[path.stem] = document
    return documents


DOCUMENTS = _documents()
CASES = [
    pytest.param(type_name, case, id=f"{type_name}: {case['name']}")
    for type_name, document in DOCUMENTS.items()
    for case in document["cases"]
]


@dataclass(frozen=True)
class WireType:
    """How one fixture type converts: JSON data to a value and back, and the type hint
    whose Dex codec stores it."""

    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]
    hint: object


def _interrupts(data: Any) -> tuple[AgentInterrupt, ...]:
    assert isinstance(data, list)
    return tuple(from_wire(AgentInterrupt, item) for item in data)  # pyright: ignore[reportUnknownVariableType]


def _settings(data: Any) -> dict[str, Any]:
    return decode_session_settings(Value(WireKind.JSON, json.dumps(data)))


def _settings_data(settings: Any) -> Any:
    return json.loads(encode_session_settings(settings).data)


def wire_type(type_name: str) -> WireType:
    if type_name == "PendingInterrupts":
        return WireType(_interrupts, to_wire, tuple[AgentInterrupt, ...])
    if type_name == "SessionSettings":
        return WireType(_settings, _settings_data, SessionSettingsValue)
    cls = getattr(values, type_name)
    return WireType(lambda data: from_wire(cls, data), to_wire, cls)


def test_every_fixture_names_its_source() -> None:
    for type_name, document in DOCUMENTS.items():
        assert document["source"].startswith("dex-agents-typescript-0.2.0 README"), type_name
        assert document["cases"], type_name
        names = [case["name"] for case in document["cases"]]
        assert len(names) == len(set(names)), type_name


@pytest.mark.parametrize(("type_name", "case"), CASES)
def test_fixture_json_decodes_and_encodes_to_the_contract_json(
    type_name: str, case: dict[str, Any]
) -> None:
    kind = wire_type(type_name)
    decoded = kind.decode(case["wire"])
    assert kind.encode(decoded) == case["encoded"]
    # What this core writes decodes to the same value, and writes the same JSON again.
    again = kind.decode(case["encoded"])
    assert again == decoded
    assert kind.encode(again) == case["encoded"]


@pytest.mark.parametrize(("type_name", "case"), CASES)
def test_the_session_codecs_store_the_fixture_json(type_name: str, case: dict[str, Any]) -> None:
    codec = session_codec_registry().resolve(wire_type(type_name).hint)
    decoded = codec.decode(Value(WireKind.JSON, json.dumps(case["wire"])))
    stored = codec.encode(decoded)
    assert stored.kind is WireKind.JSON
    assert json.loads(stored.data) == case["encoded"]


COMPLETE_CASES = [
    pytest.param(type_name, case, id=f"{type_name}: {case['name']}")
    for type_name, document in DOCUMENTS.items()
    for case in document["cases"]
    if case["wire"] == case["encoded"]
    and type_name != "SessionSettings"
    and not unknown_fields(wire_type(type_name).decode(case["wire"]))
]


@pytest.mark.parametrize(("type_name", "case"), COMPLETE_CASES)
def test_dex_default_codecs_agree_on_complete_values(type_name: str, case: dict[str, Any]) -> None:
    # Dex's automatic dataclass codec needs every field when it reads and drops fields it
    # does not know, so only complete values without such fields; it writes the same
    # JSON. (It cannot write a SessionSettings object; see test_session_settings_storage.py.)
    kind = wire_type(type_name)
    codec = CodecRegistry().resolve(kind.hint)
    decoded = codec.decode(Value(WireKind.JSON, json.dumps(case["wire"])))
    assert decoded == kind.decode(case["wire"])
    assert json.loads(codec.encode(decoded).data) == case["encoded"]


# --- Python values built here, one per type ------------------------------------------------

_USER_1 = AgentMessage(
    sequence=1,
    turn_id="turn-1",
    role="user",
    framework_item='{"type":"user_text","text":"Where is order 42?"}',
    text="Where is order 42?",
)
_ASSISTANT_2 = AgentMessage(
    sequence=2,
    turn_id="turn-1",
    role="assistant",
    framework_item=(
        '{"type":"model_output","provider":"openai","api":"responses","item":{},"text":null,'
        '"tool_calls":[{"id":"call-1","name":"lookup_order","arguments":"{\\"order_id\\":\\"42\\"}"}]}'
    ),
    tool_call_id="call-1",
    tool_name="lookup_order",
    tool_arguments='{"order_id":"42"}',
)
_TOOL_3 = AgentMessage(
    sequence=3,
    turn_id="turn-1",
    role="tool",
    framework_item=(
        '{"type":"tool_result","tool_call_id":"call-1","tool_name":"lookup_order",'
        '"output":"shipped"}'
    ),
    tool_call_id="call-1",
    tool_name="lookup_order",
    tool_arguments='{"order_id":"42"}',
    tool_output="shipped",
)
_ASSISTANT_4 = AgentMessage(
    sequence=4,
    turn_id="turn-1",
    role="assistant",
    framework_item=(
        '{"type":"model_output","provider":"openai","api":"responses","item":{},'
        '"text":"Order 42 has shipped.","tool_calls":[]}'
    ),
    text="Order 42 has shipped.",
)
_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
_RECORD = AgentToolCall(
    tool_call_id="call-1",
    turn_id="turn-1",
    tool_name="lookup_order",
    arguments='{"order_id":"42"}',
    effect=ToolEffect.READ,
    requires_approval=False,
    status=AgentToolCallStatus.SUCCEEDED,
    deferral_order=0,
    output="shipped",
    trace_context=_TRACEPARENT,
)
_APPROVAL = AgentInterrupt(
    interrupt_id="call-2",
    kind=InterruptKind.APPROVAL,
    turn_id="turn-2",
    tool_call_id="call-2",
    tool_name="charge_card",
    arguments='{"amount":5}',
    deadline="2026-11-29T12:05:00.000Z",
)
_QUESTION = AgentInterrupt(
    interrupt_id="call-3-input-1",
    kind=InterruptKind.QUESTION,
    turn_id="turn-2",
    tool_call_id="call-3",
    tool_name="book_flight",
    arguments='{"flight":"LH 400"}',
    question="Which seat?",
    choices=("aisle", "window"),
    allows_free_text=False,
)
_TASKS = (
    PlanTask("Back up the database", "completed"),
    PlanTask("Run the migration", "in_progress"),
    PlanTask("Check the dashboards", "pending"),
)
_USAGE = AgentUsage(
    model_calls=3,
    input_tokens=300,
    output_tokens=60,
    total_tokens=360,
    cache_read_tokens=100,
    reasoning_tokens=12,
)

BUILT: dict[tuple[str, str], Any] = {
    ("AgentEvent", "turn_started"): AgentEvent(
        type="turn_started",
        turn_id="turn-1",
        attempt=1,
        step_execution_id="RunModel-1",
        payload='{"sequence":1}',
    ),
    ("AgentInterrupt", "question"): AgentInterrupt(
        interrupt_id="call-4",
        kind=InterruptKind.QUESTION,
        turn_id="turn-3",
        tool_call_id="call-4",
        tool_name="ask_user",
        arguments='{"question":"Which size?"}',
        question="Which size?",
        choices=("S", "M"),
        allows_free_text=False,
    ),
    ("AgentInterruptResolution", "answered question"): AgentInterruptResolution(
        interrupt_id="call-4", approved=True, answer="M"
    ),
    ("AgentMessage", "user message"): AgentMessage(
        sequence=1,
        turn_id="turn-1",
        role="user",
        framework_item='{"role":"user","content":"Where is order 42?"}',
        text="Where is order 42?",
    ),
    ("AgentMessageChunk", "a chunk of consecutive messages"): AgentMessageChunk(
        messages=(_USER_1, _ASSISTANT_2, _TOOL_3, _ASSISTANT_4)
    ),
    ("AgentMessageChunkRange", "one chunk's range"): AgentMessageChunkRange(33, 64),
    ("AgentMessageIndex", "two chunks, the window after them"): AgentMessageIndex(
        chunks=(AgentMessageChunkRange(1, 32), AgentMessageChunkRange(33, 64)),
        first_sequence=1,
        window_first_sequence=65,
    ),
    ("AgentPlan", "an active plan"): AgentPlan(revision=3, status="active", tasks=_TASKS),
    ("AgentSessionStartInput", "with session settings"): AgentSessionStartInput(
        session_settings={"model": "small"}
    ),
    (
        "AgentSnapshot",
        "a running turn with a plan, a summary, a queued message and settings",
    ): AgentSnapshot(
        state=AgentState(
            status=AgentStatus.RUNNING_TOOLS,
            turn_count=2,
            active_turn_id="turn-2",
            message_count=6,
            interaction_mode=InteractionMode.EXECUTING,
            accepts_turn_control=True,
        ),
        messages=(_USER_1, _ASSISTANT_2, _TOOL_3, _ASSISTANT_4),
        pending_interrupts=(_APPROVAL,),
        tool_calls=(
            replace(_RECORD, turn_id="turn-2"),
            AgentToolCall(
                tool_call_id="call-2",
                turn_id="turn-2",
                tool_name="charge_card",
                arguments='{"amount":5}',
                effect=ToolEffect.NON_IDEMPOTENT_WRITE,
                requires_approval=True,
                status=AgentToolCallStatus.AWAITING_APPROVAL,
                deferral_order=1,
                trace_context=_TRACEPARENT,
            ),
        ),
        usage=_USAGE,
        queued_message_count=1,
        plan=AgentPlan(revision=3, status="active", tasks=_TASKS),
        queued_messages=(QueuedUserMessage("msg-7", "Also check order 8"),),
        context_summary=ContextSummary(1, 2, "The user asked about order 42."),
        session_settings={"model": "gpt-5"},
    ),
    ("AgentState", "compacting during an executing turn"): AgentState(
        status=AgentStatus.COMPACTING_CONTEXT,
        turn_count=4,
        active_turn_id="turn-4",
        message_count=40,
        interaction_mode=InteractionMode.EXECUTING,
        accepts_turn_control=True,
    ),
    ("AgentToolCall", "0.2.0 record: a succeeded read with its trace context"): _RECORD,
    ("AgentUsage", "0.2.0 shape"): AgentUsage(
        model_calls=2,
        input_tokens=120,
        output_tokens=40,
        total_tokens=160,
        cache_read_tokens=5,
        cache_write_tokens=1,
        reasoning_tokens=8,
    ),
    ("AgentUserMessage", "0.2.0 plan mode"): AgentUserMessage("Plan the migration", plan_mode=True),
    ("AnswerQuestionInput", "an answer"): AnswerQuestionInput("call-3-input-1", "aisle"),
    ("CancelTurnInput", "a named turn"): CancelTurnInput("turn-3"),
    ("CompactContextInput", "summarize through 40"): CompactContextInput(40),
    ("ContextSummary", "the second summary"): ContextSummary(
        generation=2, last_sequence=40, summary="The user is migrating the orders database."
    ),
    ("DeleteQueuedMessageInput", "by ID"): DeleteQueuedMessageInput("msg-7"),
    ("ExecutePlanInput", "revision 2"): ExecutePlanInput(2),
    ("ListAgentMessagesInput", "an earlier page"): ListAgentMessagesInput(
        before_sequence=5, limit=2
    ),
    ("ListAgentMessagesOutput", "a page with an earlier one"): ListAgentMessagesOutput(
        messages=(_ASSISTANT_2, _TOOL_3), next_before_sequence=2
    ),
    ("PendingInterrupts", "an approval and a tool's question"): (_APPROVAL, _QUESTION),
    ("PlanExecutionRequest", "approval of revision 2"): PlanExecutionRequest(2),
    ("PlanTask", "in progress"): PlanTask("Run the migration", "in_progress"),
    ("QueuedUserMessage", "queued in plan mode"): QueuedUserMessage(
        "msg-8", "Plan it", plan_mode=True
    ),
    ("ResolveInterruptInput", "reject with a message"): ResolveInterruptInput(
        "call-2", False, "too expensive"
    ),
    ("SessionSettings", "a model choice"): {
        "model": "gpt-5",
        "reasoning": {"effort": "low"},
        "tags": ["beta"],
    },
    ("SteerUserMessageInput", "new text"): SteerUserMessageInput(text="Use staging instead"),
    ("ToolCallCancellation", "turn cancelled"): ToolCallCancellation("turn_cancelled"),
    ("ToolCallCompleted", "a call became final"): ToolCallCompleted("call-1"),
    ("TurnCancellationRequest", "cancel_turn of turn-3"): TurnCancellationRequest(
        turn_id="turn-3", requested_at="2026-11-29T12:00:00.000Z"
    ),
    ("TurnControlRequest", "a steer wakes the session"): TurnControlRequest(),
    ("TurnReplySequence", "replies of turn-3 start at 7"): TurnReplySequence("turn-3", 7),
    ("TurnSessionSettings", "turn-2's copy"): TurnSessionSettings(
        "turn-2", session_settings={"model": "gpt-5"}
    ),
    ("UpdateSessionSettingsInput", "replace"): UpdateSessionSettingsInput(
        session_settings={"model": "gpt-5-mini"}
    ),
}


def test_every_fixture_type_has_a_built_value() -> None:
    assert {type_name for type_name, _ in BUILT} == set(DOCUMENTS)
    for type_name, case_name in BUILT:
        assert case_name in {c["name"] for c in DOCUMENTS[type_name]["cases"]}, case_name


@pytest.mark.parametrize(("type_name", "case_name"), list(BUILT), ids=lambda p: str(p))
def test_a_python_value_encodes_to_the_fixture_and_decodes_back(
    type_name: str, case_name: str
) -> None:
    value = BUILT[(type_name, case_name)]
    case = next(c for c in DOCUMENTS[type_name]["cases"] if c["name"] == case_name)
    kind = wire_type(type_name)
    data = kind.encode(value)
    assert data == case["encoded"]
    assert kind.decode(data) == value
    # Through the Dex codec the session stores it with: the same value back.
    codec = session_codec_registry().resolve(kind.hint)
    assert codec.decode(codec.encode(value)) == value


def test_unknown_fields_are_kept_through_a_round_trip() -> None:
    stored = {"text": "hi", "plan_mode": False, "sent_from": {"app": "web"}}
    message = from_wire(AgentUserMessage, stored)
    assert unknown_fields(message) == {"sent_from": {"app": "web"}}
    assert to_wire(message) == stored
    # A value this core builds itself has none.
    assert unknown_fields(AgentUserMessage(text="hi")) == {}


def test_event_payloads_are_json_objects() -> None:
    for case in DOCUMENTS["AgentEvent"]["cases"]:
        event = from_wire(AgentEvent, case["wire"])
        assert isinstance(json.loads(event.payload), dict)
