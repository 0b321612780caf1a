"""Provider-neutral request and response types of one model call.

The Stepwise loop stores its transcript as these items (as the ``framework_item``
JSON of each stored message) and hands them to a ``ModelClient``. A client
replays its own provider's stored output unchanged and reads only the text and
tool calls of another provider's output, so a session can change model between
turns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

from dex_agents._contract import ModelCallMetadata
from dex_agents._values import AgentUsage

JsonObject: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call a model asked for; ``arguments`` is the model's JSON text."""

    call_id: str
    name: str
    arguments: str

    def to_json(self) -> JsonObject:
        return {"tool_call_id": self.call_id, "tool_name": self.name, "arguments": self.arguments}

    @staticmethod
    def from_json(value: Mapping[str, Any]) -> ModelToolCall:
        return ModelToolCall(
            call_id=_required_str(value, "tool_call_id"),
            name=_required_str(value, "tool_name"),
            arguments=_required_str(value, "arguments"),
        )


@dataclass(frozen=True)
class UserTextItem:
    """A user message of the transcript (also the session's notes)."""

    text: str
    type: Literal["user_text"] = "user_text"

    def to_json(self) -> JsonObject:
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True)
class ModelOutputItem:
    """One model response, stored exactly as its provider returned it.

    ``item`` is the provider-native JSON (OpenAI Responses output items, Anthropic
    content blocks); ``text`` and ``tool_calls`` are the provider-neutral view that
    any other provider can be given.
    """

    provider: str
    api: str
    item: Any
    text: str
    tool_calls: tuple[ModelToolCall, ...] = ()
    type: Literal["model_output"] = "model_output"

    def native_items(self, provider: str, api: str) -> list[JsonObject] | None:
        """The stored provider items, to replay unchanged, when this output came from
        ``provider`` over ``api``; ``None`` for another provider's output."""
        stored: object = self.item
        if self.provider != provider or self.api != api or not isinstance(stored, list):
            return None
        return list(cast("list[JsonObject]", stored))

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "provider": self.provider,
            "api": self.api,
            "item": self.item,
            "text": self.text,
            "tool_calls": [call.to_json() for call in self.tool_calls],
        }


@dataclass(frozen=True)
class ToolResultItem:
    """The result text of one tool call, as the model sees it."""

    tool_call_id: str
    tool_name: str
    output: str
    type: Literal["tool_result"] = "tool_result"

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "output": self.output,
        }


TranscriptItem: TypeAlias = UserTextItem | ModelOutputItem | ToolResultItem
"""One item of a model request's transcript: a user text, a model output, or a tool result."""


def transcript_item_from_json(value: Any) -> TranscriptItem:
    """Decode a stored ``framework_item`` object; raise ``ValueError`` for any other shape."""
    if not isinstance(value, dict):
        raise ValueError("a Stepwise framework item must be a JSON object")
    obj: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    kind = obj.get("type")
    if kind == "user_text":
        return UserTextItem(text=_required_str(obj, "text"))
    if kind == "tool_result":
        return ToolResultItem(
            tool_call_id=_required_str(obj, "tool_call_id"),
            tool_name=_required_str(obj, "tool_name"),
            output=_required_str(obj, "output"),
        )
    if kind == "model_output":
        calls = obj.get("tool_calls", [])
        if not isinstance(calls, list):
            raise ValueError("model_output.tool_calls must be a list")
        call_values: list[Any] = calls  # pyright: ignore[reportUnknownVariableType]
        decoded: list[ModelToolCall] = []
        for call in call_values:
            if not isinstance(call, dict):
                raise ValueError("each model_output tool call must be an object")
            decoded.append(ModelToolCall.from_json(call))  # pyright: ignore[reportUnknownArgumentType]
        return ModelOutputItem(
            provider=_required_str(obj, "provider"),
            api=_required_str(obj, "api"),
            item=obj.get("item"),
            text=_required_str(obj, "text"),
            tool_calls=tuple(decoded),
        )
    raise ValueError(f"unknown Stepwise framework item type {kind!r}")


def transcript_item_to_text(item: TranscriptItem) -> str:
    """The compact JSON text stored as a message's ``framework_item``."""
    return json.dumps(item.to_json(), separators=(",", ":"), ensure_ascii=False)


def _required_str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string")
    return value


@dataclass(frozen=True)
class ModelToolDefinition:
    """A tool offered to the model: its name, description and JSON Schema."""

    name: str
    description: str
    parameters: JsonObject


def _no_options() -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ModelSettings:
    """Settings passed to the provider unchanged.

    ``provider_options`` are extra keyword arguments of the provider SDK call,
    such as ``{"thinking": {"type": "enabled", "budget_tokens": 2048}}``.
    """

    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    provider_options: Mapping[str, Any] = field(default_factory=_no_options)


@dataclass(frozen=True)
class ModelRequest:
    """Everything one model call sees, built from committed session state only."""

    instructions: str
    items: tuple[TranscriptItem, ...]
    tools: tuple[ModelToolDefinition, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    tool_choice: Literal["auto", "required"] = "auto"
    """``required`` forces a call of one of ``tools`` (a planning turn's ``write_todos``)."""


@dataclass(frozen=True)
class ModelResponse:
    """The result of one model call: the item to store, and what it cost.

    ``usage`` covers this call only, with ``model_calls`` 1.
    """

    output: ModelOutputItem
    reasoning: str = ""
    usage: AgentUsage = field(default_factory=AgentUsage)
    metadata: ModelCallMetadata = field(default_factory=ModelCallMetadata)


class ModelStreamSink(Protocol):
    """Where a client writes live deltas while the response streams in."""

    async def text_delta(self, text: str) -> None: ...

    async def reasoning_delta(self, text: str) -> None: ...


class DiscardingStreamSink:
    """A sink that drops every delta, for calls nobody watches."""

    async def text_delta(self, text: str) -> None:
        return None

    async def reasoning_delta(self, text: str) -> None:
        return None


class RecordingStreamSink:
    """A sink that keeps every delta in order, for tests of a model client."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []

    async def text_delta(self, text: str) -> None:
        self.text.append(text)

    async def reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)


@runtime_checkable
class ModelClient(Protocol):
    """Makes exactly one model call per ``generate``, with no retries of its own.

    A failure raises; the Stepwise loop's ``RunModel`` attempt is the retry.
    """

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse: ...


class ModelClientError(RuntimeError):
    """The provider answered with an error or an unusable response."""

    __module__ = "dex_agents.models"  # the public import path, as tracebacks show it


def model_forced_tool_choice_refusal(model: object, settings: ModelSettings | None) -> str | None:
    """Why ``model`` refuses a forced tool choice under ``settings``, or ``None``.

    A client that knows declares it with a ``forced_tool_choice_refusal(settings)``
    method (the Anthropic and LiteLLM clients do); any other client is taken to accept
    one. The Stepwise loop checks it for ``planning_tool_choice="required"``.
    """
    declared = getattr(model, "forced_tool_choice_refusal", None)
    if not callable(declared):
        return None
    refusal = declared(settings or ModelSettings())
    return refusal if isinstance(refusal, str) and refusal else None


def tool_call_arguments_object(arguments: str) -> JsonObject:
    """The model's argument text as a JSON object, or ``{}`` when it is not one.

    Used only to translate another provider's call for a provider whose API
    wants an object (Anthropic ``tool_use.input``).
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    if isinstance(parsed, dict):
        return parsed  # pyright: ignore[reportUnknownVariableType]
    return {}
