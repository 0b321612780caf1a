"""``ScriptedModelClient``: a model that answers from a function of the request.

It runs an agent without a model key, for demos, tutorials and tests. Keep the
script deterministic: a crashed ``RunModel`` calls it again with the same
request and must get the same answer.
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dex_agents._contract import ModelCallMetadata
from dex_agents._values import AgentUsage
from dex_agents.models._types import (
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelStreamSink,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)

PROVIDER = "scripted"
API = "scripted"
DEFAULT_MAX_RECORDED_REQUESTS = 100


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call of a scripted reply; ``arguments`` is an object or JSON text.

    Without ``call_id`` the client numbers the call from the request, so the
    same request always gets the same ID.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=lambda: _empty())
    call_id: str | None = None


def _empty() -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ScriptedModelReply:
    """What the scripted model answers: text, reasoning and tool calls."""

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ScriptedToolCall] = ()


ScriptedModelScript = Callable[
    [ModelRequest], "ScriptedModelReply | str | Awaitable[ScriptedModelReply | str]"
]
"""The reply function of a ``ScriptedModelClient``: the request in, a reply or text out
(sync or async)."""


class ScriptedModelClient:
    """A ``ModelClient`` whose every reply comes from ``script(request)``.

    ``script`` may be sync or async and may return a plain string for a text
    reply. ``requests`` keeps the latest ``max_recorded_requests`` requests.
    ``stream_chunk_size`` splits the text into that many characters per delta,
    so a watcher sees it arrive in pieces.
    """

    def __init__(
        self,
        script: ScriptedModelScript,
        *,
        max_recorded_requests: int = DEFAULT_MAX_RECORDED_REQUESTS,
        stream_chunk_size: int | None = None,
    ) -> None:
        if not callable(script):
            raise TypeError("script must be a function of the ModelRequest")
        if type(max_recorded_requests) is not int or max_recorded_requests < 0:
            raise ValueError("max_recorded_requests must be an integer, not negative")
        if stream_chunk_size is not None and (
            type(stream_chunk_size) is not int or stream_chunk_size < 1
        ):
            raise ValueError("stream_chunk_size must be an integer of at least 1")
        self._script = script
        self._stream_chunk_size = stream_chunk_size
        self.requests: deque[ModelRequest] = deque(maxlen=max_recorded_requests)

    @staticmethod
    def user_texts(request: ModelRequest) -> list[str]:
        """The texts of the request's user messages, oldest first."""
        return [item.text for item in request.items if isinstance(item, UserTextItem)]

    @staticmethod
    def tool_results(request: ModelRequest) -> list[ToolResultItem]:
        """The tool results after the request's last user message, oldest first.

        These are the results the model has not answered yet in this turn.
        """
        results: list[ToolResultItem] = []
        for item in request.items:
            if isinstance(item, UserTextItem):
                results = []
            elif isinstance(item, ToolResultItem):
                results.append(item)
            else:
                # A model output answers every result before it.
                results = []
        return results

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        self.requests.append(request)
        produced = self._script(request)
        reply = await produced if inspect.isawaitable(produced) else produced
        if isinstance(reply, str):
            reply = ScriptedModelReply(text=reply)
        if not isinstance(reply, ScriptedModelReply):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("a scripted model must return a ScriptedModelReply or a str")
        if reply.reasoning:
            await stream.reasoning_delta(reply.reasoning)
        for chunk in self._chunks(reply.text):
            await stream.text_delta(chunk)
        round_number = 1 + sum(1 for item in request.items if isinstance(item, ModelOutputItem))
        calls = tuple(
            ModelToolCall(
                call_id=call.call_id or f"call_{round_number}_{index + 1}",
                name=call.name,
                arguments=call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(dict(call.arguments), separators=(",", ":")),
            )
            for index, call in enumerate(reply.tool_calls)
        )
        item = {
            "text": reply.text,
            "reasoning": reply.reasoning,
            "tool_calls": [call.to_json() for call in calls],
        }
        return ModelResponse(
            output=ModelOutputItem(
                provider=PROVIDER, api=API, item=item, text=reply.text, tool_calls=calls
            ),
            reasoning=reply.reasoning,
            usage=_usage(request, reply.text, len(calls)),
            metadata=ModelCallMetadata(
                request_model=PROVIDER, response_model=PROVIDER, provider_name=PROVIDER
            ),
        )

    def _chunks(self, text: str) -> list[str]:
        if not text:
            return []
        size = self._stream_chunk_size
        if size is None:
            return [text]
        return [text[start : start + size] for start in range(0, len(text), size)]


def _usage(request: ModelRequest, text: str, call_count: int) -> AgentUsage:
    # A stable stand-in for token counts: about four characters per token.
    # The items' JSON lengths summed, from one encode of the list (its brackets and ", "
    # separators taken off): per-item encodes cost a turn more the longer the session.
    items = [item.to_json() for item in request.items]
    characters = len(request.instructions)
    if items:
        characters += len(json.dumps(items)) - 2 - 2 * (len(items) - 1)
    input_tokens = max(1, characters // 4)
    output_tokens = max(1, len(text) // 4) if text else call_count
    return AgentUsage(
        model_calls=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
