"""``AnthropicModelClient``: one streamed Anthropic Messages API call per ``generate``.

The response's content blocks are stored exactly as returned, so thinking
blocks keep their signatures (and redacted thinking its data) and replay
unchanged to Anthropic on the next call.
"""

from __future__ import annotations

import json
from typing import Any, cast

from dex_agents._tool_choice import forced_tool_choice_refusal, thinking_enabled
from dex_agents._values import AgentUsage
from dex_agents.models._extras import missing_extra_error
from dex_agents.models._native import check_model_name, native_model_response
from dex_agents.models._types import (
    JsonObject,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamSink,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
    tool_call_arguments_object,
)

try:
    import anthropic
    from anthropic.types import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_extra_error("anthropic", "anthropic") from error

PROVIDER = "anthropic"
API = "messages"
DEFAULT_MAX_OUTPUT_TOKENS = 8192


class AnthropicModelClient:
    """A ``ModelClient`` for Anthropic's Messages API.

    Pass ``client`` to reuse a configured ``anthropic.AsyncAnthropic``; its
    retries are turned off, because a retry is a new ``RunModel`` attempt.
    Without it, the client reads ``ANTHROPIC_API_KEY`` like the SDK does. The
    Messages API needs ``max_tokens``: ``ModelSettings.max_output_tokens``, or
    ``max_output_tokens`` here.
    """

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    ) -> None:
        check_model_name(model)
        if type(max_output_tokens) is not int or max_output_tokens < 1:
            raise ValueError("max_output_tokens must be an integer of at least 1")
        if client is not None and not isinstance(client, anthropic.AsyncAnthropic):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"client must be an anthropic.AsyncAnthropic, got {type(client).__name__}"
            )
        self.model = model
        base = client if client is not None else anthropic.AsyncAnthropic(max_retries=0)
        self._client = base.with_options(max_retries=0)
        self._max_output_tokens = max_output_tokens

    def forced_tool_choice_refusal(self, settings: ModelSettings) -> str | None:
        """Why this model refuses a forced tool choice under ``settings`` (Claude Opus 5.5 and
        Sonnet 5.5, or extended thinking in ``provider_options``), or ``None``."""
        return forced_tool_choice_refusal(
            self.model, extended_thinking=thinking_enabled(settings.provider_options)
        )

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        arguments = self._request_arguments(request)
        async with self._client.messages.stream(**arguments) as events:
            async for event in events:
                # The SDK's helper events, by their public ``type`` (their classes
                # are not all exported).
                if event.type == "text":
                    await stream.text_delta(event.text)
                elif event.type == "thinking":
                    await stream.reasoning_delta(event.thinking)
            message = await events.get_final_message()
        return _response_from_anthropic(message, self.model)

    def _request_arguments(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        arguments: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_output_tokens or self._max_output_tokens,
            "messages": messages_input(request),
        }
        if request.instructions:
            arguments["system"] = request.instructions
        if request.tools:
            arguments["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                }
                for tool in request.tools
            ]
            offered = {tool.name for tool in request.tools}
            # A planning turn offers fewer tools than its history used; define the rest too.
            arguments["tools"].extend(
                {
                    "name": name,
                    "description": "Not available in this call.",
                    "input_schema": {"type": "object"},
                }
                for name in _tool_names_used(arguments["messages"])
                if name not in offered
            )
            if request.tool_choice == "required":
                arguments["tool_choice"] = {"type": "any"}
        else:
            used = _tool_names_used(arguments["messages"])
            if used:
                # The API wants every tool of the history defined; offering them with
                # tool_choice "none" keeps "no tools in this call" while the history replays.
                arguments["tools"] = [
                    {
                        "name": name,
                        "description": "Not available in this call.",
                        "input_schema": {"type": "object"},
                    }
                    for name in used
                ]
                arguments["tool_choice"] = {"type": "none"}
        if settings.temperature is not None:
            arguments["temperature"] = settings.temperature
        arguments.update(settings.provider_options)
        return arguments


def messages_input(request: ModelRequest) -> list[JsonObject]:
    """The transcript as Messages API messages.

    Our own provider's output is replayed exactly as stored; another provider's
    output is reduced to text and ``tool_use`` blocks. Consecutive blocks of one
    role are merged into one message, so tool results and a following note form
    one user turn that starts with the results, as the API requires.
    """
    messages: list[JsonObject] = []

    def add(role: str, blocks: list[JsonObject]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            cast("list[JsonObject]", messages[-1]["content"]).extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})

    for item in request.items:
        if isinstance(item, UserTextItem):
            add("user", [{"type": "text", "text": item.text}])
        elif isinstance(item, ToolResultItem):
            add(
                "user",
                [{"type": "tool_result", "tool_use_id": item.tool_call_id, "content": item.output}],
            )
        elif (native := item.native_items(PROVIDER, API)) is not None:
            add("assistant", native)
        else:
            blocks: list[JsonObject] = []
            if item.text:
                blocks.append({"type": "text", "text": item.text})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.call_id,
                    "name": call.name,
                    "input": tool_call_arguments_object(call.arguments),
                }
                for call in item.tool_calls
            )
            add("assistant", blocks)
    return messages


def _tool_names_used(messages: list[JsonObject]) -> list[str]:
    names: list[str] = []
    for message in messages:
        for block in cast("list[JsonObject]", message["content"]):
            name = block.get("name")
            if block.get("type") == "tool_use" and isinstance(name, str) and name not in names:
                names.append(name)
    return names


def _response_from_anthropic(message: Message, request_model: str) -> ModelResponse:
    text_parts: list[str] = []
    reasoning_parts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            text_parts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append(
                ModelToolCall(
                    call_id=block.id, name=block.name, arguments=_compact_json(block.input)
                )
            )
        elif isinstance(block, ThinkingBlock):
            reasoning_parts.append(block.thinking)
    return native_model_response(
        provider=PROVIDER,
        api=API,
        native_items=message.content,
        text_parts=text_parts,
        reasoning_parts=reasoning_parts,
        tool_calls=calls,
        usage=_usage(message.usage),
        request_model=request_model,
        response_model=message.model,
        response_id=message.id,
        finish_reason=message.stop_reason,
    )


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _usage(usage: Usage) -> AgentUsage:
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    # Anthropic counts cached input apart from input_tokens; we report the whole input.
    input_tokens = usage.input_tokens + cache_read + cache_write
    return AgentUsage(
        model_calls=1,
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=input_tokens + usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
