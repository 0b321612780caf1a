"""What the provider model clients share: the model name check and how a response is stored."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from dex_agents._contract import ModelCallMetadata
from dex_agents._values import AgentUsage
from dex_agents.models._types import JsonObject, ModelOutputItem, ModelResponse, ModelToolCall


def check_model_name(model: str) -> None:
    """``ValueError`` unless ``model`` is a non-empty model name."""
    if not isinstance(model, str) or not model.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("model must be a non-empty model name")


def native_model_response(
    *,
    provider: str,
    api: str,
    native_items: Sequence[BaseModel],
    text_parts: Sequence[str],
    reasoning_parts: Sequence[str],
    tool_calls: Sequence[ModelToolCall],
    usage: AgentUsage,
    request_model: str,
    response_model: str,
    response_id: str,
    finish_reason: str | None,
) -> ModelResponse:
    """One provider response as stored: its items exactly as returned, plus what was read from them.

    The items are kept as the provider sent them (absent fields left out), so
    they replay unchanged on the next call to the same provider; text parts are
    joined as they are, reasoning parts one a line.
    """
    items: list[JsonObject] = [
        item.model_dump(mode="json", exclude_none=True) for item in native_items
    ]
    return ModelResponse(
        output=ModelOutputItem(
            provider=provider,
            api=api,
            item=items,
            text="".join(text_parts),
            tool_calls=tuple(tool_calls),
        ),
        reasoning="\n".join(reasoning_parts),
        usage=usage,
        metadata=ModelCallMetadata(
            request_model=request_model,
            response_model=response_model,
            provider_name=provider,
            response_id=response_id,
            finish_reasons=(finish_reason,) if finish_reason else (),
        ),
    )
