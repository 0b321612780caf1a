"""``OpenAIChatModelClient``: one streamed Chat Completions call per ``generate``.

Many providers speak OpenAI's Chat Completions API at their own ``base_url``
(Groq, Gemini's OpenAI-compatible endpoint, vLLM, Ollama, OpenRouter, ...), so
one client covers them. The assistant message is assembled from the streamed
chunks and stored as a Chat Completions message, which replays unchanged on the
next call; reasoning text some servers stream (``reasoning_content`` or
``reasoning`` on the delta) goes to Thinking but is not replayed, because
servers refuse it as input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    from openai.types.chat import (
        ChatCompletionChunk,
        ChatCompletionMessage,
        ChatCompletionMessageFunctionToolCall,
    )
    from openai.types.chat.chat_completion_chunk import ChoiceDelta
    from openai.types.chat.chat_completion_message_function_tool_call import Function
    from openai.types.completion_usage import CompletionUsage
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_extra_error("openai", "openai") from error

API = "chat_completions"
DEFAULT_PROVIDER = "openai"
# Fields compatible servers use for streamed reasoning text (DeepSeek/vLLM, Groq/OpenRouter).
_REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIChatModelClient:
    """A ``ModelClient`` for the Chat Completions API of OpenAI or any compatible server.

    Give ``base_url`` and ``api_key`` for a compatible server, or ``client`` to
    reuse a configured ``openai.AsyncOpenAI`` (not both); retries are turned off,
    because a retry is a new ``RunModel`` attempt. Without either, the client
    reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` like the SDK does.

    ``provider`` names the server in the stored output and the call metadata
    (``"groq"``, ``"gemini"``); a stored output replays natively only to a client
    of the same provider. ``include_usage`` asks for the usage chunk
    (``stream_options``); turn it off for a server that refuses it.
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = DEFAULT_PROVIDER,
        include_usage: bool = True,
    ) -> None:
        check_model_name(model)
        if client is not None and not isinstance(client, openai.AsyncOpenAI):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"client must be an openai.AsyncOpenAI, got {type(client).__name__}")
        if client is not None and (base_url is not None or api_key is not None):
            raise ValueError("give either client or base_url/api_key, not both")
        if not isinstance(provider, str) or not provider.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("provider must be a non-empty name")
        if not isinstance(include_usage, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("include_usage must be a bool")
        self.model = model
        self.provider = provider
        base = (
            client
            if client is not None
            else openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        )
        self._client = base.with_options(max_retries=0)
        self._include_usage = include_usage

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        arguments = chat_request_arguments(
            request, self.model, self.provider, include_usage=self._include_usage
        )
        chunks = await self._client.chat.completions.create(**arguments, stream=True)
        message = StreamedChatMessage()
        async for chunk in chunks:
            await message.add(chunk, stream)
        return message.response(self.provider, self.model)


def chat_request_arguments(
    request: ModelRequest, model: str, provider: str, *, include_usage: bool
) -> dict[str, Any]:
    """The arguments of one streamed Chat Completions call (``stream`` itself left out)."""
    settings = request.settings
    arguments: dict[str, Any] = {
        "model": model,
        "messages": chat_messages_input(request, provider),
    }
    if include_usage:
        arguments["stream_options"] = {"include_usage": True}
    if request.tools:
        arguments["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        if request.tool_choice == "required":
            arguments["tool_choice"] = "required"
    if settings.temperature is not None:
        arguments["temperature"] = settings.temperature
    if settings.max_output_tokens is not None:
        arguments["max_completion_tokens"] = settings.max_output_tokens
    if settings.reasoning_effort is not None:
        arguments["reasoning_effort"] = settings.reasoning_effort
    arguments.update(settings.provider_options)
    return arguments


def chat_messages_input(
    request: ModelRequest, provider: str = DEFAULT_PROVIDER
) -> list[JsonObject]:
    """The instructions and transcript as Chat Completions messages.

    Output stored by a client of ``provider`` is replayed exactly as stored;
    another provider's output is reduced to its text and function calls.
    """
    messages: list[JsonObject] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for item in request.items:
        if isinstance(item, UserTextItem):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, ToolResultItem):
            messages.append(
                {"role": "tool", "tool_call_id": item.tool_call_id, "content": item.output}
            )
        elif (native := item.native_items(provider, API)) is not None:
            messages.extend(native)
        else:
            message: JsonObject = {"role": "assistant", "content": item.text or None}
            if item.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in item.tool_calls
                ]
            messages.append(message)
    return messages


@dataclass
class _PartialToolCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


@dataclass
class StreamedChatMessage:
    """The assistant message as its chunks arrive: deltas go to the sink as they come.

    Shared by every client that streams Chat Completions chunks (``LiteLLMModelClient``
    too); ``response`` raises ``ModelClientError`` when no chunk came.
    """

    chunk_seen: bool = False
    response_id: str = ""
    response_model: str = ""
    text: list[str] = field(default_factory=list[str])
    reasoning: list[str] = field(default_factory=list[str])
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict[int, _PartialToolCall])
    finish_reason: str | None = None
    usage: CompletionUsage | None = None

    async def add(self, chunk: ChatCompletionChunk, stream: ModelStreamSink) -> None:
        self.chunk_seen = True
        self.response_id = self.response_id or chunk.id
        self.response_model = self.response_model or chunk.model
        if chunk.usage is not None:
            self.usage = chunk.usage
        # One completion was asked for (n=1); any other choice index is ignored.
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
            await self._add_delta(choice.delta, stream)

    async def _add_delta(self, delta: ChoiceDelta, stream: ModelStreamSink) -> None:
        reasoning = _reasoning_text(delta)
        if reasoning:
            self.reasoning.append(reasoning)
            await stream.reasoning_delta(reasoning)
        if delta.content:
            self.text.append(delta.content)
            await stream.text_delta(delta.content)
        for call_delta in delta.tool_calls or ():
            partial = self.tool_calls.setdefault(call_delta.index, _PartialToolCall())
            if call_delta.id:
                partial.call_id = call_delta.id
            function = call_delta.function
            if function is not None:
                if function.name:
                    partial.name += function.name
                if function.arguments:
                    partial.arguments.append(function.arguments)

    def response(self, provider: str, request_model: str) -> ModelResponse:
        if not self.chunk_seen:
            raise ModelClientError("the Chat Completions stream ended without a chunk")
        calls: list[ModelToolCall] = []
        for index in sorted(self.tool_calls):
            partial = self.tool_calls[index]
            if not partial.call_id or not partial.name:
                raise ModelClientError(
                    f"the Chat Completions stream sent tool call {index} without an id or a name"
                )
            calls.append(
                ModelToolCall(
                    call_id=partial.call_id,
                    name=partial.name,
                    arguments="".join(partial.arguments) or "{}",
                )
            )
        text = "".join(self.text)
        stored = ChatCompletionMessage(
            role="assistant",
            content=text if text or not calls else None,
            tool_calls=[
                ChatCompletionMessageFunctionToolCall(
                    id=call.call_id,
                    type="function",
                    function=Function(name=call.name, arguments=call.arguments),
                )
                for call in calls
            ]
            or None,
        )
        return native_model_response(
            provider=provider,
            api=API,
            native_items=[stored],
            text_parts=[text],
            reasoning_parts=["".join(self.reasoning)] if self.reasoning else [],
            tool_calls=calls,
            usage=_usage(self.usage),
            request_model=request_model,
            response_model=self.response_model,
            response_id=self.response_id,
            finish_reason=self.finish_reason,
        )


def _reasoning_text(delta: ChoiceDelta) -> str:
    extra = delta.model_extra or {}
    for name in _REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(usage: CompletionUsage | None) -> AgentUsage:
    if usage is None:
        return AgentUsage(model_calls=1)
    prompt_details = usage.prompt_tokens_details
    completion_details = usage.completion_tokens_details
    return AgentUsage(
        model_calls=1,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        cache_read_tokens=(prompt_details.cached_tokens or 0) if prompt_details else 0,
        reasoning_tokens=(completion_details.reasoning_tokens or 0) if completion_details else 0,
    )
