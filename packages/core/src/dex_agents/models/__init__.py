"""Model clients of the Stepwise loop: one provider call per ``generate``.

``OpenAIResponsesModelClient`` and ``OpenAIChatModelClient`` need
``dex-agents[openai]``, ``AnthropicModelClient`` needs ``dex-agents[anthropic]`` and
``LiteLLMModelClient`` needs ``dex-agents[litellm]``; they load on first use, so this
package imports without any of those SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dex_agents._contract import ModelCallMetadata
from dex_agents.models._scripted import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedModelScript,
    ScriptedToolCall,
)
from dex_agents.models._types import (
    DiscardingStreamSink,
    ModelClient,
    ModelClientError,
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamSink,
    ModelToolCall,
    ModelToolDefinition,
    RecordingStreamSink,
    ToolResultItem,
    TranscriptItem,
    UserTextItem,
    transcript_item_from_json,
    transcript_item_to_text,
)

if TYPE_CHECKING:
    from dex_agents.models._anthropic_messages import AnthropicModelClient
    from dex_agents.models._litellm import LiteLLMModelClient
    from dex_agents.models._openai_chat import OpenAIChatModelClient
    from dex_agents.models._openai_responses import OpenAIResponsesModelClient

__all__ = [
    "AnthropicModelClient",
    "DiscardingStreamSink",
    "LiteLLMModelClient",
    "ModelCallMetadata",
    "ModelClient",
    "ModelClientError",
    "ModelOutputItem",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamSink",
    "ModelToolCall",
    "ModelToolDefinition",
    "OpenAIChatModelClient",
    "OpenAIResponsesModelClient",
    "RecordingStreamSink",
    "ScriptedModelClient",
    "ScriptedModelReply",
    "ScriptedModelScript",
    "ScriptedToolCall",
    "ToolResultItem",
    "TranscriptItem",
    "UserTextItem",
    "transcript_item_from_json",
    "transcript_item_to_text",
]


def __getattr__(name: str) -> Any:
    # Provider SDKs are optional extras: import them only when asked for.
    if name == "OpenAIResponsesModelClient":
        from dex_agents.models._openai_responses import OpenAIResponsesModelClient

        return OpenAIResponsesModelClient
    if name == "OpenAIChatModelClient":
        from dex_agents.models._openai_chat import OpenAIChatModelClient

        return OpenAIChatModelClient
    if name == "AnthropicModelClient":
        from dex_agents.models._anthropic_messages import AnthropicModelClient

        return AnthropicModelClient
    if name == "LiteLLMModelClient":
        from dex_agents.models._litellm import LiteLLMModelClient

        return LiteLLMModelClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
