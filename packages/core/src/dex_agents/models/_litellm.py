"""``LiteLLMModelClient``: one streamed LiteLLM ``acompletion`` call per ``generate``.

LiteLLM reaches many providers (Gemini, Groq, Bedrock, Vertex, Ollama, ...) through
one function that takes and streams OpenAI Chat Completions shapes, whatever the
provider speaks. So this client builds its request and assembles its answer with the
Chat Completions client's own code (``openai_chat``): the stored assistant message is
a Chat Completions message, replayed unchanged on the next call, and the output of
one client replays natively to the other for the same provider name.

The client reaches nothing but the provider. Importing this module sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless it is already set, so LiteLLM reads its
bundled cost map instead of fetching one when it loads, and
``litellm.disable_hf_tokenizer_download`` unless you set it, so counting the tokens of a
stream that came without usage (LiteLLM does, for some model names) uses the bundled
tokenizer instead of downloading one from Hugging Face.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from dex_agents._tool_choice import (
    forced_tool_choice_refusal,
    is_anthropic_model,
    thinking_enabled,
)
from dex_agents.models._extras import missing_extra_error
from dex_agents.models._native import check_model_name
from dex_agents.models._types import (
    ModelClientError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamSink,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
try:
    import litellm
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_extra_error("litellm", "litellm") from error
if litellm.disable_hf_tokenizer_download is None:
    litellm.disable_hf_tokenizer_download = True

# LiteLLM depends on the OpenAI SDK, so the Chat Completions client's module imports.
from openai.types.chat import ChatCompletionChunk

from dex_agents.models._openai_chat import (
    StreamedChatMessage,
    chat_request_arguments,
)

__all__ = ["LiteLLMModelClient"]

DEFAULT_PROVIDER = "litellm"


class LiteLLMModelClient:
    """A ``ModelClient`` that calls ``litellm.acompletion`` (``dex-agents[litellm]``).

    ``model`` is LiteLLM's model name with its provider prefix (``"gemini/gemini-2.5-flash"``,
    ``"groq/llama-3.3-70b-versatile"``, ``"openai/<name>"`` with ``api_base`` for any
    OpenAI-compatible server). ``api_key`` and ``api_base`` go to LiteLLM; without them
    it reads the provider's usual environment variables (``GEMINI_API_KEY``, ...).

    ``provider`` names the provider in the stored output and the call metadata; it
    defaults to the model's prefix (``"gemini"``), or ``"litellm"`` for a name without
    one. LiteLLM's retries (``num_retries``) and the OpenAI SDK's under it
    (``max_retries``) are off, because a retry is a new ``RunModel`` attempt; a failed
    call raises LiteLLM's exception (``litellm.RateLimitError`` for a 429,
    ``litellm.ServiceUnavailableError`` or ``InternalServerError`` for a 5xx, ...), which
    subclass the OpenAI SDK's. ``include_usage`` asks for the usage chunk
    (``stream_options``). ``completion_options`` are more keyword arguments of every
    ``acompletion`` call (``timeout``, ``extra_headers``, ``drop_params``, ...); a
    request's ``ModelSettings.provider_options`` are added per call.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_base: str | None = None,
        provider: str | None = None,
        include_usage: bool = True,
        completion_options: Mapping[str, Any] | None = None,
    ) -> None:
        check_model_name(model)
        if provider is None:
            provider = model.split("/", 1)[0] if "/" in model else DEFAULT_PROVIDER
        if not isinstance(provider, str) or not provider.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("provider must be a non-empty name")
        if not isinstance(include_usage, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("include_usage must be a bool")
        options = dict(completion_options or {})
        reserved = sorted(set(options) & {"model", "messages", "stream", "api_key", "api_base"})
        if reserved:
            raise ValueError(f"completion_options must not set {reserved}; use the arguments")
        self.model = model
        self.provider = provider
        self._include_usage = include_usage
        self._options: dict[str, Any] = {
            **options,
            "api_key": api_key,
            "api_base": api_base,
            "num_retries": 0,
            "max_retries": 0,
        }

    def forced_tool_choice_refusal(self, settings: ModelSettings) -> str | None:
        """Why this model refuses a forced tool choice under ``settings`` (an Anthropic model
        that refuses one, or extended thinking in the options), or ``None``."""
        thinking = thinking_enabled(self._options) or thinking_enabled(settings.provider_options)
        anthropic = is_anthropic_model(self.model, self.provider)
        return forced_tool_choice_refusal(self.model, extended_thinking=thinking and anthropic)

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        arguments = chat_request_arguments(
            request, self.model, self.provider, include_usage=self._include_usage
        )
        chunks: Any = await litellm.acompletion(**self._options, **arguments, stream=True)
        message = StreamedChatMessage()
        async for chunk in chunks:
            await message.add(_chat_completion_chunk(chunk), stream)
        return message.response(self.provider, self.model)


def _chat_completion_chunk(chunk: Any) -> ChatCompletionChunk:
    """LiteLLM's streamed chunk (``ModelResponseStream``) as the OpenAI SDK's type.

    LiteLLM's chunk has the Chat Completions fields; reasoning text it normalizes to
    ``delta.reasoning_content`` stays an extra field, where the shared code reads it.
    """
    try:
        return ChatCompletionChunk.model_validate(chunk.model_dump(exclude_none=True))
    except (AttributeError, ValidationError) as error:
        raise ModelClientError(
            f"LiteLLM streamed a chunk that is not a Chat Completions chunk: {error}"
        ) from error
