"""Wire values of the agent session: persisted values, RPC inputs and outputs, events.

Field names are the snake_case JSON keys of the session contract, and enum values
are its strings, so a session written by this package reads the same as one written
by the TypeScript core. ``to_wire``/``from_wire`` (re-exported here) convert to and
from JSON-compatible data; Dex itself encodes these dataclasses with its automatic
JSON codec, which yields the same JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, cast

from dex import CodecRegistry, JsonCodec, Value, WireKind

from dex_agents._decode_cache import DecodeCache
from dex_agents._wire import WireValue, from_wire, from_wire_json, to_wire, to_wire_json

__all__ = [
    "FINAL_TOOL_CALL_STATUSES",
    "SESSION_VALUE_DECODE_CACHE",
    "STORED_MESSAGE_DECODE_CACHE",
    "AgentEvent",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessageChunk",
    "AgentMessageChunkRange",
    "AgentMessageIndex",
    "AgentPlan",
    "AgentSessionStartInput",
    "AgentSnapshot",
    "AgentState",
    "AgentStatus",
    "AgentToolCall",
    "AgentToolCallRecord",
    "AgentToolCallStatus",
    "AgentUsage",
    "AgentUserMessage",
    "AnswerQuestionInput",
    "CancelTurnInput",
    "CompactContextInput",
    "ContextSummary",
    "DeleteQueuedMessageInput",
    "ExecutePlanInput",
    "FrameworkMessage",
    "InteractionMode",
    "InterruptKind",
    "ListAgentMessagesInput",
    "ListAgentMessagesOutput",
    "MessageRole",
    "PlanExecutionRequest",
    "PlanTask",
    "QueuedUserMessage",
    "ResolveInterruptInput",
    "SessionSettingsValue",
    "SteerUserMessageInput",
    "ToolCallCancellation",
    "ToolCallCompleted",
    "ToolEffect",
    "TurnCancellationRequest",
    "TurnControlRequest",
    "TurnReplySequence",
    "TurnSessionSettings",
    "UpdateSessionSettingsInput",
    "add_agent_usage",
    "decode_session_settings",
    "empty_agent_usage",
    "encode_session_settings",
    "format_timestamp",
    "from_wire",
    "from_wire_json",
    "message_sequence_key",
    "parse_timestamp",
    "plan_execution_key",
    "session_codec_registry",
    "to_wire",
    "to_wire_json",
]


class ToolEffect(StrEnum):
    """What a tool does to the outside world; picks its Step, retries and default approval."""

    READ = "read"
    """No side effect: `CallTool`, up to 3 attempts, no approval by default."""
    IDEMPOTENT_WRITE = "idempotent_write"
    """A write that the idempotency key makes safe to repeat: `CallTool`, up to 3 attempts."""
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    """A write that must not repeat: `CallSingleAttemptTool`, approval by default."""
    UNCLASSIFIED = "unclassified"
    """Unknown effect, treated as a non-idempotent write."""


class AgentToolCallStatus(StrEnum):
    """Status of a tool call record.

    A runner sees only ``approved`` and the four final statuses in
    ``AgentTurnContext.tool_calls``. Stored records (snapshots, ``AgentToolCalls``)
    can also hold the waiting statuses of built-in tools and tool tasks.
    """

    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    OUTCOME_UNKNOWN = "outcome_unknown"
    AWAITING_ANSWER = "awaiting_answer"
    WAITING_FOR_TIMER = "waiting_for_timer"
    WAITING_FOR_TASK = "waiting_for_task"

    @property
    def is_final(self) -> bool:
        """Whether the call has its result and will not run again."""
        return self in FINAL_TOOL_CALL_STATUSES


FINAL_TOOL_CALL_STATUSES = frozenset(
    {
        AgentToolCallStatus.SUCCEEDED,
        AgentToolCallStatus.FAILED,
        AgentToolCallStatus.REJECTED,
        AgentToolCallStatus.OUTCOME_UNKNOWN,
    }
)
"""The statuses of a call that has its result and will not run again."""


class AgentStatus(StrEnum):
    """What the session is doing, as ``AgentState.status``."""

    WAITING_FOR_USER_MESSAGE = "waiting_for_user_message"
    RUNNING_MODEL = "running_model"
    RUNNING_TOOLS = "running_tools"
    COMPACTING_CONTEXT = "compacting_context"


class InteractionMode(StrEnum):
    """The kind of the current turn, as ``AgentState.interaction_mode``."""

    CHAT = "chat"
    PLANNING = "planning"
    EXECUTING = "executing"


class InterruptKind(StrEnum):
    """What a pending interrupt waits for."""

    APPROVAL = "approval"
    QUESTION = "question"


MessageRole = Literal["user", "assistant", "tool"]
"""Who a stored message is from, as ``AgentMessage.role``."""


def message_sequence_key(sequence: int) -> str:
    """The ``AgentMessages`` instance key of a message: its sequence, 12 digits, zero-padded."""
    if type(sequence) is not int or sequence < 1 or sequence > 999_999_999_999:
        raise ValueError(
            f"message sequence must be an integer from 1 to 999999999999, got {sequence!r}"
        )
    return f"{sequence:012d}"


def format_timestamp(moment: datetime) -> str:
    """A wire timestamp: UTC, millisecond precision, ``Z`` suffix, as JavaScript writes it."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """Read a wire timestamp written by either core."""
    moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment.astimezone(UTC)


# --- usage -------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentUsage(WireValue):
    """Token usage of one model call (a runner's report) or of a whole session."""

    wire_name = "AgentUsage"

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in (
            "model_calls",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"AgentUsage.{name} must not be negative")


def empty_agent_usage() -> AgentUsage:
    """Usage with every count zero."""
    return AgentUsage()


def add_agent_usage(left: AgentUsage, right: AgentUsage) -> AgentUsage:
    """The field-by-field sum of two usages."""
    return AgentUsage(
        model_calls=left.model_calls + right.model_calls,
        input_tokens=left.input_tokens + right.input_tokens,
        output_tokens=left.output_tokens + right.output_tokens,
        total_tokens=left.total_tokens + right.total_tokens,
        cache_read_tokens=left.cache_read_tokens + right.cache_read_tokens,
        cache_write_tokens=left.cache_write_tokens + right.cache_write_tokens,
        reasoning_tokens=left.reasoning_tokens + right.reasoning_tokens,
    )


# --- messages ----------------------------------------------------------------------


@dataclass(frozen=True)
class FrameworkMessage(WireValue):
    """One message as a framework produced it.

    ``framework_item`` is the framework's own JSON for the message, replayed
    unchanged to rebuild model input; the other fields are display projections.
    """

    wire_name = "FrameworkMessage"

    role: MessageRole
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None


@dataclass(frozen=True)
class AgentMessage(WireValue):
    """A stored message: a ``FrameworkMessage`` with its sequence and turn."""

    wire_name = "AgentMessage"

    sequence: int
    turn_id: str
    role: MessageRole
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None

    @staticmethod
    def from_framework_message(
        message: FrameworkMessage, *, sequence: int, turn_id: str
    ) -> AgentMessage:
        """Store ``message`` at ``sequence`` as part of ``turn_id``."""
        return AgentMessage(
            sequence=sequence,
            turn_id=turn_id,
            role=message.role,
            framework_item=message.framework_item,
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            tool_arguments=message.tool_arguments,
            tool_output=message.tool_output,
        )

    def to_framework_message(self) -> FrameworkMessage:
        """The message without its storage fields."""
        return FrameworkMessage(
            role=self.role,
            framework_item=self.framework_item,
            text=self.text,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            tool_arguments=self.tool_arguments,
            tool_output=self.tool_output,
        )


# --- state -------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentState(WireValue):
    """The ``AgentState`` Attribute: where the session is."""

    wire_name = "AgentState"

    status: AgentStatus = AgentStatus.WAITING_FOR_USER_MESSAGE
    turn_count: int = 0
    """Turns started so far; the next turn is ``turn-<turn_count + 1>``."""
    active_turn_id: str | None = None
    message_count: int = 0
    """Messages stored so far; the last message has this sequence."""
    last_turn_error: str | None = None
    interaction_mode: InteractionMode = InteractionMode.CHAT
    accepts_turn_control: bool = False
    """Whether the active turn can be steered or cancelled: set when a Worker with steering
    starts the turn, so a turn that an older Worker started is never steered."""


@dataclass(frozen=True)
class TurnReplySequence(WireValue):
    """The ``TurnReplySequence`` Attribute: where the latest turn's replies start."""

    wire_name = "TurnReplySequence"

    turn_id: str
    sequence: int


# --- tool calls --------------------------------------------------------------------


@dataclass(frozen=True)
class AgentToolCall(WireValue):
    """A tool call record, one ``AgentToolCalls`` instance keyed by ``tool_call_id``.

    Records exist only for the active turn. ``deferral_order`` is the zero-based
    position of the call in the model's response order across the turn.
    """

    wire_name = "AgentToolCall"

    tool_call_id: str
    turn_id: str
    tool_name: str
    arguments: str
    effect: ToolEffect
    requires_approval: bool
    status: AgentToolCallStatus
    deferral_order: int
    output: str | None = None
    error: str | None = None
    rejection_message: str | None = None
    tool_source_reference: str | None = None
    trace_context: str | None = None
    wait_until: str | None = None
    input_continuation: str | None = None
    input_answers: tuple[str, ...] = ()
    input_question: str | None = None
    input_choices: tuple[str, ...] | None = None
    input_allows_free_text: bool | None = None
    cancellation_reason: str | None = None
    task_id: str | None = None
    task_poll_interval_seconds: int | None = None
    task_answer_pending: bool = False

    @property
    def is_final(self) -> bool:
        """Whether the call has its result."""
        return self.status in FINAL_TOOL_CALL_STATUSES


AgentToolCallRecord = AgentToolCall
"""Stored records and runner records share one class; see ``AgentToolCallStatus``."""


@dataclass(frozen=True)
class ToolCallCompleted(WireValue):
    """Published to ``ToolCallResults`` once when a call's record becomes final."""

    wire_name = "ToolCallCompleted"

    tool_call_id: str


# --- interrupts --------------------------------------------------------------------


@dataclass(frozen=True)
class AgentInterrupt(WireValue):
    """A pending approval or question, an entry of the ``PendingInterrupts`` Attribute."""

    wire_name = "AgentInterrupt"

    interrupt_id: str
    kind: InterruptKind
    turn_id: str
    tool_call_id: str
    tool_name: str
    arguments: str
    deadline: str | None = None
    """ISO 8601 UTC time after which the interrupt is rejected, or null."""
    question: str | None = None
    choices: tuple[str, ...] | None = None
    allows_free_text: bool | None = None


@dataclass(frozen=True)
class AgentInterruptResolution(WireValue):
    """Published to ``InterruptResolutions[<interrupt_id>]`` by the resolving RPC."""

    wire_name = "AgentInterruptResolution"

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None
    answer: str | None = None


# --- user messages -----------------------------------------------------------------


@dataclass(frozen=True)
class AgentUserMessage(WireValue):
    """A user message: the ``send_user_message`` input and a ``QueuedUserMessages`` entry."""

    wire_name = "AgentUserMessage"

    text: str
    plan_mode: bool = False


@dataclass(frozen=True)
class QueuedUserMessage(WireValue):
    """A queued or steered message as a snapshot lists it, with its Channel message ID."""

    wire_name = "QueuedUserMessage"

    message_id: str
    text: str
    plan_mode: bool = False


@dataclass(frozen=True)
class AgentSessionStartInput(WireValue):
    """Input of ``StartAgentSession``, the Flow's start Step."""

    wire_name = "AgentSessionStartInput"

    initial_message: str | None = None
    session_settings: Mapping[str, Any] | None = None
    """Stored as ``SessionSettings``; the model calls of every turn read them."""


# --- plans and summaries (filled by later releases; carried on the wire now) ---------


@dataclass(frozen=True)
class PlanTask(WireValue):
    """One task of a plan."""

    wire_name = "PlanTask"

    content: str
    status: Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True)
class AgentPlan(WireValue):
    """The session's plan, as ``write_todos`` wrote it."""

    wire_name = "AgentPlan"

    revision: int
    status: Literal["draft", "active", "completed", "cleared"]
    tasks: tuple[PlanTask, ...] = ()


@dataclass(frozen=True)
class ContextSummary(WireValue):
    """The summary of the messages through ``last_sequence``, once the session compacts."""

    wire_name = "ContextSummary"

    generation: int
    last_sequence: int
    summary: str


# --- message storage, compaction and session settings ------------------------------


@dataclass(frozen=True)
class AgentMessageChunk(WireValue):
    """One ``AgentMessageChunks`` instance: consecutive older messages, never rewritten."""

    wire_name = "AgentMessageChunk"

    messages: tuple[AgentMessage, ...]


@dataclass(frozen=True)
class AgentMessageChunkRange(WireValue):
    """The first and last sequence of one kept chunk."""

    wire_name = "AgentMessageChunkRange"

    first_sequence: int
    last_sequence: int


@dataclass(frozen=True)
class AgentMessageIndex(WireValue):
    """The ``AgentMessageIndex`` Attribute: where each stored message lives.

    ``chunks`` lists every kept chunk in order; ``first_sequence`` is the oldest stored
    message (retention deleted every earlier one); messages from
    ``window_first_sequence`` on are in the ``AgentMessages`` window, except an
    oversized one, which has a chunk of its own at or after it.
    """

    wire_name = "AgentMessageIndex"

    chunks: tuple[AgentMessageChunkRange, ...] = ()
    first_sequence: int = 1
    window_first_sequence: int = 1


@dataclass(frozen=True)
class CompactContextInput(WireValue):
    """Input of ``CompactContext``: summarize the messages through ``through_sequence``."""

    wire_name = "CompactContextInput"

    through_sequence: int


SessionSettingsValue = dict[str, Any]
"""The value of the ``SessionSettings`` Attribute: the settings object itself.

It is stored as a JSON object (a Dex JSON value), as the TypeScript core stores it,
the same object ``AgentSessionStartInput.session_settings`` and
``AgentSnapshot.session_settings`` carry. ``session_codec_registry()`` holds its codec
under this type hint: Dex's automatic codec reads such an object but cannot write one
(it checks every value's type, and ``Any`` matches none). Builds of this package before
that change stored the object's JSON text as a Dex string; ``decode_session_settings``
reads both, but Dex hands a codec only values of its own kind, so the session reads an
old value through ``dex_agents._session_settings.read_session_settings``.
"""


def encode_session_settings(settings: Mapping[str, Any]) -> Value:
    """The Dex value ``SessionSettings`` stores for ``settings``: a JSON object."""
    if not isinstance(settings, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"session settings must be a JSON object, got {type(settings).__name__}")
    data = cast("Mapping[Any, Any]", settings)
    if not all(isinstance(key, str) for key in data):
        raise TypeError("session settings keys must be strings")
    try:
        text = json.dumps(dict(data), allow_nan=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as error:
        raise TypeError(f"session settings must be JSON: {error}") from error
    return Value(WireKind.JSON, text)


def decode_session_settings(value: Value) -> dict[str, Any]:
    """The settings object of a stored ``SessionSettings`` value.

    A JSON object is the contract's shape. A Dex string is the shape earlier builds of
    this package wrote, the object's JSON text: it reads as that object (``{}`` when
    the text is empty or holds no object), so a session started before the change
    still loads.
    """
    if value.kind is WireKind.STRING and isinstance(value.data, str):
        if not value.data:
            return {}
        legacy = json.loads(value.data)
        return cast("dict[str, Any]", legacy) if isinstance(legacy, dict) else {}
    if value.kind is not WireKind.JSON or not isinstance(value.data, str):
        raise TypeError("SessionSettings must be a JSON object")
    data = json.loads(value.data)
    if not isinstance(data, dict):
        raise TypeError(f"SessionSettings must be a JSON object, got {type(data).__name__}")
    return cast("dict[str, Any]", data)


@dataclass(frozen=True)
class _SessionSettingsCodec:
    """``encode_session_settings`` and ``decode_session_settings`` as a Dex codec."""

    type_name: str = "SessionSettings"
    wire_kind: WireKind = WireKind.JSON

    def encode(self, value: Mapping[str, Any]) -> Value:
        return encode_session_settings(value)

    def decode(self, value: Value) -> dict[str, Any]:
        return decode_session_settings(value)


@dataclass(frozen=True)
class TurnSessionSettings(WireValue):
    """The ``TurnSessionSettings`` Attribute: the settings a turn started with."""

    wire_name = "TurnSessionSettings"

    turn_id: str
    session_settings: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())


@dataclass(frozen=True)
class UpdateSessionSettingsInput(WireValue):
    """Input of ``update_session_settings``: the new settings; ``{}`` clears them."""

    wire_name = "UpdateSessionSettingsInput"

    session_settings: Mapping[str, Any] | None


# --- RPC inputs and outputs --------------------------------------------------------


@dataclass(frozen=True)
class ResolveInterruptInput(WireValue):
    """Input of ``resolve_interrupt``."""

    wire_name = "ResolveInterruptInput"

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None


@dataclass(frozen=True)
class AnswerQuestionInput(WireValue):
    """Input of ``answer_question``."""

    wire_name = "AnswerQuestionInput"

    interrupt_id: str
    answer: str


@dataclass(frozen=True)
class ListAgentMessagesInput(WireValue):
    """Input of ``list_agent_messages``: the page ends before ``before_sequence`` (null: end)."""

    wire_name = "ListAgentMessagesInput"

    before_sequence: int | None = None
    limit: int | None = None


@dataclass(frozen=True)
class ListAgentMessagesOutput(WireValue):
    """A page of stored messages, oldest first."""

    wire_name = "ListAgentMessagesOutput"

    messages: tuple[AgentMessage, ...]
    next_before_sequence: int | None
    """Pass as ``before_sequence`` for the previous page; null on the first message."""
    deleted_before_sequence: int | None = None


@dataclass(frozen=True)
class AgentSnapshot(WireValue):
    """Output of ``get_agent_snapshot``: one committed view of the session."""

    wire_name = "AgentSnapshot"

    state: AgentState | None
    messages: tuple[AgentMessage, ...] = ()
    pending_interrupts: tuple[AgentInterrupt, ...] = ()
    tool_calls: tuple[AgentToolCall, ...] = ()
    usage: AgentUsage = field(default_factory=AgentUsage)
    queued_message_count: int = 0
    plan: AgentPlan | None = None
    queued_messages: tuple[QueuedUserMessage, ...] = ()
    steered_messages: tuple[QueuedUserMessage, ...] = ()
    context_summary: ContextSummary | None = None
    session_settings: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    """The next turn's settings (``{}`` for none)."""


# --- steering, cancellation and plan execution --------------------------------------


@dataclass(frozen=True)
class TurnControlRequest(WireValue):
    """Published to ``TurnControlRequests`` by ``steer_user_message``: wakes the session."""

    wire_name = "TurnControlRequest"

    kind: Literal["steer"] = "steer"


@dataclass(frozen=True)
class TurnCancellationRequest(WireValue):
    """The ``TurnCancellationRequest`` Attribute, written only by ``cancel_turn``."""

    wire_name = "TurnCancellationRequest"

    turn_id: str
    requested_at: str


@dataclass(frozen=True)
class ToolCallCancellation(WireValue):
    """Published to ``ToolCallCancellations[<tool_call_id>]``: ends the call's wait."""

    wire_name = "ToolCallCancellation"

    reason: Literal["steered", "turn_cancelled"]


@dataclass(frozen=True)
class PlanExecutionRequest(WireValue):
    """An approval of one plan revision (``PlanExecutions``, ``PendingPlanExecution``)."""

    wire_name = "PlanExecutionRequest"

    revision: int


def plan_execution_key(revision: int) -> str:
    """The ``PlanExecutions`` instance key of ``revision``: its decimal text."""
    return str(revision)


@dataclass(frozen=True)
class SteerUserMessageInput(WireValue):
    """Input of ``steer_user_message``: exactly one of ``message_id`` and ``text``."""

    wire_name = "SteerUserMessageInput"

    message_id: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class DeleteQueuedMessageInput(WireValue):
    """Input of ``delete_queued_message``."""

    wire_name = "DeleteQueuedMessageInput"

    message_id: str


@dataclass(frozen=True)
class CancelTurnInput(WireValue):
    """Input of ``cancel_turn``; ``turn_id`` ``None`` means the active turn."""

    wire_name = "CancelTurnInput"

    turn_id: str | None = None


@dataclass(frozen=True)
class ExecutePlanInput(WireValue):
    """Input of ``execute_plan``: the plan revision the user approved."""

    wire_name = "ExecutePlanInput"

    revision: int


# --- events ------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentEvent(WireValue):
    """One ``AgentEvents`` Stream message.

    ``payload`` is the event's JSON object as text. Group live text by
    ``(turn_id, step_execution_id, attempt)`` and keep the highest attempt.
    """

    wire_name = "AgentEvent"

    type: str
    turn_id: str
    attempt: int
    step_execution_id: str
    payload: str

    def payload_data(self) -> Any:
        """The payload parsed from JSON."""
        return json.loads(self.payload)


def _wire_codec(cls: type[WireValue]) -> JsonCodec[Any]:
    return JsonCodec(
        cls.__name__,
        lambda data: from_wire(cls, data),
        to_wire,
        cls,
    )


def _interrupt_list_codec() -> JsonCodec[Any]:
    def decode(data: Any) -> tuple[AgentInterrupt, ...]:
        if not isinstance(data, list):
            raise TypeError("PendingInterrupts must be a JSON array")
        items = cast("list[Any]", data)
        return tuple(from_wire(AgentInterrupt, item) for item in items)

    return JsonCodec("PendingInterrupts", decode, to_wire, tuple[AgentInterrupt, ...])


@dataclass(frozen=True)
class _DecodeOnceCodec:
    """A ``JsonCodec`` whose decoded values are kept by their JSON text (``DecodeCache``).

    Only for immutable values (frozen, no mutable containers), so one object can
    be handed to every reader of a text: stored messages and chunks, which every
    model Step reads again, and the session values each Step reads and writes.
    Encoding remembers the value under its text too: the next Step reads what
    this process just wrote without decoding it.
    """

    codec: JsonCodec[Any]
    cache: DecodeCache[Any]

    @property
    def type_name(self) -> str:
        return self.codec.type_name

    @property
    def wire_kind(self) -> WireKind:
        return self.codec.wire_kind

    def encode(self, value: Any) -> Value:
        encoded = self.codec.encode(value)
        if encoded.kind is WireKind.JSON and isinstance(encoded.data, str):
            self.cache.remember(encoded.data, value, kind=self.codec.type_name)
        return encoded

    def decode(self, value: Value) -> Any:
        text = value.data
        if value.kind is not WireKind.JSON or not isinstance(text, str):
            return self.codec.decode(value)
        return self.cache.get_or_decode(
            text, lambda _: self.codec.decode(value), kind=self.codec.type_name
        )


STORED_MESSAGE_DECODE_CACHE: DecodeCache[Any] = DecodeCache()
"""Decoded ``AgentMessage`` and ``AgentMessageChunk`` values of this process, by JSON text."""

SESSION_VALUE_DECODE_CACHE: DecodeCache[Any] = DecodeCache(4 * 1024 * 1024)
"""Decoded session values that Steps read again and again (``AgentState``, ``AgentUsage``,
tool call records, the message index, ...), by JSON text; apart from the messages, so
their turnover never evicts stored messages."""

_SESSION_VALUES_DECODED_ONCE: tuple[type[WireValue], ...] = (
    AgentState,
    AgentUsage,
    AgentToolCall,
    TurnReplySequence,
    AgentMessageIndex,
    ContextSummary,
    AgentPlan,
)


def session_codec_registry() -> CodecRegistry:
    """A ``CodecRegistry`` whose session values decode tolerantly, and messages once.

    Dex's automatic dataclass codec needs every field in the stored JSON. These
    codecs write the same JSON but fill a missing field with its default, so a
    Worker reads values that another version or core wrote without a field it
    knows. Stored messages and message chunks are immutable, so each stored text
    is decoded once per process (``STORED_MESSAGE_DECODE_CACHE``) instead of on
    every model Step: a long session's turn no longer pays for its whole history.
    The session values every Step reads (state, usage, records, index, ...) are
    immutable too and kept the same way (``SESSION_VALUE_DECODE_CACHE``); a value
    this process encodes is kept under its text, so the next Step does not decode it.
    ``AgentHost`` uses this registry unless told otherwise; with your own Registry
    pass it as ``dex.Registry([...], session_codec_registry(), ...)``.
    """
    classes: tuple[type[WireValue], ...] = (
        AgentUsage,
        FrameworkMessage,
        AgentMessage,
        AgentState,
        TurnReplySequence,
        AgentToolCall,
        ToolCallCompleted,
        AgentInterrupt,
        AgentInterruptResolution,
        AgentUserMessage,
        QueuedUserMessage,
        AgentSessionStartInput,
        PlanTask,
        AgentPlan,
        ContextSummary,
        AgentMessageChunk,
        AgentMessageChunkRange,
        AgentMessageIndex,
        CompactContextInput,
        TurnSessionSettings,
        UpdateSessionSettingsInput,
        ResolveInterruptInput,
        AnswerQuestionInput,
        ListAgentMessagesInput,
        ListAgentMessagesOutput,
        AgentSnapshot,
        AgentEvent,
        TurnControlRequest,
        TurnCancellationRequest,
        ToolCallCancellation,
        PlanExecutionRequest,
        SteerUserMessageInput,
        DeleteQueuedMessageInput,
        CancelTurnInput,
        ExecutePlanInput,
    )
    codecs: dict[object, Any] = {cls: _wire_codec(cls) for cls in classes}
    for immutable in (AgentMessage, AgentMessageChunk):
        codecs[immutable] = _DecodeOnceCodec(codecs[immutable], STORED_MESSAGE_DECODE_CACHE)
    for immutable in _SESSION_VALUES_DECODED_ONCE:
        codecs[immutable] = _DecodeOnceCodec(codecs[immutable], SESSION_VALUE_DECODE_CACHE)
    codecs[tuple[AgentInterrupt, ...]] = _DecodeOnceCodec(
        _interrupt_list_codec(), SESSION_VALUE_DECODE_CACHE
    )
    codecs[SessionSettingsValue] = _SessionSettingsCodec()
    return CodecRegistry(codecs)
