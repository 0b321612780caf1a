"""The demo's Stepwise support agent and the model it talks to."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dex_agents._demo.script import demo_model_reply
from dex_agents._demo.shop import Shop, shop_tools
from dex_agents.models import (
    ScriptedModelClient,
)
from dex_agents.models._types import ModelClient
from dex_agents.session._flow import AgentSessionFlow
from dex_agents.stepwise import (
    AgentDefinition,
    ToolSource,
    create_stepwise_session_flow,
)

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "DEMO_FLOW_TYPE",
    "DemoModel",
    "DemoSetupError",
    "build_demo_flow",
    "choose_demo_model",
]

DEMO_FLOW_TYPE = "DexAgentsDemoSupport"
DEFAULT_OPENAI_MODEL = "gpt-5-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"

INSTRUCTIONS = (
    "You are the support agent of a small coffee equipment shop. Use the tools to read "
    "orders before you answer about them. Refund only when the customer asks; each refund "
    "needs the user's approval. Use ask_user when you need a decision from the user, and "
    "durable_wait when the user asks you to wait or to check again later. Keep answers short."
)


@dataclass(frozen=True)
class DemoModel:
    """The model client the demo uses, and how to describe it."""

    client: ModelClient
    label: str


def choose_demo_model(provider: str | None, model: str | None) -> DemoModel:
    """The scripted demo model, or a real provider when asked for or when its key is set.

    With no ``provider``: OpenAI when ``OPENAI_API_KEY`` is set, else Anthropic when
    ``ANTHROPIC_API_KEY`` is set, else the scripted model.
    """
    if provider is None:
        if os.environ.get("OPENAI_API_KEY"):
            provider = "openai"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            provider = "anthropic"
        else:
            provider = "scripted"
    if provider == "scripted":
        return DemoModel(
            ScriptedModelClient(demo_model_reply, stream_chunk_size=6),
            "scripted demo model (no API key)",
        )
    if provider == "openai":
        from dex_agents.models._openai_responses import OpenAIResponsesModelClient

        name = model or DEFAULT_OPENAI_MODEL
        _require_key("OPENAI_API_KEY", provider)
        return DemoModel(OpenAIResponsesModelClient(name), f"OpenAI {name}")
    if provider == "anthropic":
        from dex_agents.models._anthropic_messages import AnthropicModelClient

        name = model or DEFAULT_ANTHROPIC_MODEL
        _require_key("ANTHROPIC_API_KEY", provider)
        return DemoModel(AnthropicModelClient(name), f"Anthropic {name}")
    raise DemoSetupError(f"unknown provider {provider!r}; use scripted, openai or anthropic")


class DemoSetupError(ValueError):
    """The demo cannot start as asked; the message says what to change."""


def _require_key(variable: str, provider: str) -> None:
    if not os.environ.get(variable):
        raise DemoSetupError(
            f"--provider {provider} needs {variable}; set it, or leave --provider out "
            "to use the scripted demo model"
        )


def build_demo_flow(
    model: ModelClient, shop_file: Path, tool_sources: Sequence[ToolSource] = ()
) -> AgentSessionFlow:
    """The demo's session Flow: a support agent with shop tools, ask_user and durable_wait.

    ``tool_sources`` add tools listed at run time, such as MCP servers' (``--mcp-config``).
    """
    definition = AgentDefinition(
        name="support",
        instructions=INSTRUCTIONS,
        model=model,
        tools=shop_tools(Shop(shop_file)),
        tool_sources=tool_sources,
        built_in_tools=["ask_user", "durable_wait", "write_todos"],
        plan_mode_enabled=True,
    )
    return create_stepwise_session_flow(definition, DEMO_FLOW_TYPE)
