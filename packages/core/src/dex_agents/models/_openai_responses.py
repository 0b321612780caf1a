"""``OpenAIResponsesModelClient``: one streamed OpenAI Responses API call per ``generate``.

Responses are requested with ``store=False`` and the encrypted reasoning
content, so nothing lives on OpenAI's side between calls: the stored output
items, reasoning included, are replayed unchanged as the next call's input.
"""

from __future__ import annotations

import re
from typing import Any

from dex_agents._values import AgentUsage
from dex_agents.models._extras import missing_extra_error
from dex_agents.models._native import check_model_name, native_model_response
from dex_agents.models._types import (
    JsonObject,
    ModelClientError,
    ModelRequest,
    ModelResponse,
    ModelStreamSink,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)

try:
    import openai
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseErrorEvent,
        ResponseFailedEvent,
        ResponseFunctionToolCall,
        ResponseIncompleteEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
        ResponseReasoningSummaryTextDeltaEvent,
        ResponseTextDeltaEvent,
        ResponseUsage,
    )
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_extra_error("openai", "openai") from error

PROVIDER = "openai"
API = "responses"


class OpenAIResponsesModelClient:
    """A ``ModelClient`` for OpenAI's Responses API (or a compatible server).

    Pass ``client`` to reuse a configured ``openai.AsyncOpenAI``; its retries are
    turned off, because a retry is a new ``RunModel`` attempt. Without it, the
    client reads ``OPENAI_API_KEY`` like the SDK does.

    ``include_encrypted_reasoning`` asks for the reasoning items' encrypted content,
    which the next call needs because nothing is stored at OpenAI. OpenAI refuses it
    for models without reasoning, so by default it is on only for model names of
    reasoning families (``o1``, ``o3``, ``o4``, ``gpt-5`` except ``-chat``, ``gpt-oss``).
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        include_encrypted_reasoning: bool | None = None,
    ) -> None:
        check_model_name(model)
        if client is not None and not isinstance(client, openai.AsyncOpenAI):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"client must be an openai.AsyncOpenAI, got {type(client).__name__}")
        if include_encrypted_reasoning is not None and not isinstance(  # pyright: ignore[reportUnnecessaryIsInstance]
            include_encrypted_reasoning, bool
        ):
            raise TypeError("include_encrypted_reasoning must be a bool or None")
        self.model = model
        base = client if client is not None else openai.AsyncOpenAI(max_retries=0)
        self._client = base.with_options(max_retries=0)
        self._include_encrypted_reasoning = (
            include_encrypted_reasoning
            if include_encrypted_reasoning is not None
            else looks_like_reasoning_model(model)
        )

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        arguments = self._request_arguments(request)
        events = await self._client.responses.create(**arguments, stream=True)
        completed: Response | None = None
        async for event in events:
            if isinstance(event, ResponseTextDeltaEvent):
                await stream.text_delta(event.delta)
            elif isinstance(event, ResponseReasoningSummaryTextDeltaEvent):
                await stream.reasoning_delta(event.delta)
            elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
                completed = event.response
            elif isinstance(event, ResponseFailedEvent):
                error = event.response.error
                detail = error.message if error is not None else "no detail"
                raise ModelClientError(f"OpenAI response failed: {detail}")
            elif isinstance(event, ResponseErrorEvent):
                raise ModelClientError(f"OpenAI stream error: {event.message}")
        if completed is None:
            raise ModelClientError("the OpenAI stream ended without a completed response")
        return _response_from_openai(completed, self.model)

    def _request_arguments(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        arguments: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request),
            "store": False,
        }
        if request.instructions:
            arguments["instructions"] = request.instructions
        if request.tools:
            arguments["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": False,
                }
                for tool in request.tools
            ]
            if request.tool_choice == "required":
                arguments["tool_choice"] = "required"
        if self._include_encrypted_reasoning:
            arguments["include"] = ["reasoning.encrypted_content"]
        if settings.temperature is not None:
            arguments["temperature"] = settings.temperature
        if settings.max_output_tokens is not None:
            arguments["max_output_tokens"] = settings.max_output_tokens
        if settings.reasoning_effort is not None:
            arguments["reasoning"] = {"effort": settings.reasoning_effort, "summary": "auto"}
        arguments.update(settings.provider_options)
        return arguments


_REASONING_MODEL = re.compile(r"^(?:.*/)?(?:o\d|gpt-5(?!.*-chat)|gpt-oss)")


def looks_like_reasoning_model(model: str) -> bool:
    """Whether ``model`` names a reasoning model family, by its name alone."""
    return _REASONING_MODEL.match(model.lower()) is not None


def responses_input(request: ModelRequest) -> list[JsonObject]:
    """The transcript as Responses input items.

    Our own provider's output is replayed exactly as stored; another provider's
    output is reduced to its text and function calls.
    """
    items: list[JsonObject] = []
    for item in request.items:
        if isinstance(item, UserTextItem):
            items.append({"role": "user", "content": item.text})
        elif isinstance(item, ToolResultItem):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": item.tool_call_id,
                    "output": item.output,
                }
            )
        elif (native := item.native_items(PROVIDER, API)) is not None:
            items.extend(native)
        else:
            if item.text:
                items.append({"role": "assistant", "content": item.text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
                for call in item.tool_calls
            )
    return items


def _response_from_openai(response: Response, request_model: str) -> ModelResponse:
    text_parts: list[str] = []
    reasoning_parts: list[str] = []
    calls: list[ModelToolCall] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            text_parts.extend(
                part.text for part in item.content if isinstance(part, ResponseOutputText)
            )
        elif isinstance(item, ResponseFunctionToolCall):
            calls.append(
                ModelToolCall(call_id=item.call_id, name=item.name, arguments=item.arguments)
            )
        elif isinstance(item, ResponseReasoningItem):
            reasoning_parts.extend(part.text for part in item.summary)
    return native_model_response(
        provider=PROVIDER,
        api=API,
        native_items=response.output,
        text_parts=text_parts,
        reasoning_parts=reasoning_parts,
        tool_calls=calls,
        usage=_usage(response.usage),
        request_model=request_model,
        response_model=response.model,
        response_id=response.id,
        finish_reason=response.status,
    )


def _usage(usage: ResponseUsage | None) -> AgentUsage:
    if usage is None:
        return AgentUsage(model_calls=1)
    return AgentUsage(
        model_calls=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cache_read_tokens=usage.input_tokens_details.cached_tokens,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens,
    )
