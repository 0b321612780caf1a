"""The agent: one Stepwise session Flow whose model, system prompt, context window and
enabled tools come from each session's settings.

Session settings hold only references (``provider``, ``model``, the enabled tool
names); the Worker resolves them to clients built from its own environment, so no
credential enters Dex state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from dex_agents import AgentSessionFlow, CompactionPolicy
from dex_agents.models import ModelClient, ModelRequest, ModelResponse, ModelStreamSink
from dex_agents.stepwise import AgentDefinition, InstructionContext, create_stepwise_session_flow
from dex_agents_ai_agent.mock_model import create_mock_model
from dex_agents_ai_agent.providers import create_model_client
from dex_agents_ai_agent.tools import BUILT_IN_TOOLS, ToolCatalog

FLOW_TYPE = "AIAgent"
DEFAULT_SYSTEM_PROMPT = (
    "You are a careful, general-purpose assistant. Plan before large tasks, ask with "
    "ask_user when you need a decision, and explain what each tool did."
)
DEFAULT_CONTEXT_TOKENS = 32_000
DEFAULT_RETAINED_MESSAGES = 2_000
REFERENCE_CONTEXT_TOKENS = 4_000
"""The compaction policy's window. The library takes one window per Flow type, so each
session's own window scales its token counts to this one (see ``SessionModelClient``)."""
TRIGGER_RATIO = 0.85
RETAINED_RATIO = 0.10


@dataclass(frozen=True)
class SessionSettings:
    """What a session chose in the Portal, as stored in its session settings."""

    provider: str
    model: str
    system_prompt: str
    context_tokens: int
    enabled_tools: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "system_prompt": self.system_prompt,
            "context_tokens": self.context_tokens,
            "enabled_tools": list(self.enabled_tools),
        }

    @staticmethod
    def from_json(value: Mapping[str, Any]) -> SessionSettings:
        tools: Any = value.get("enabled_tools", [])
        tokens: Any = value.get("context_tokens", DEFAULT_CONTEXT_TOKENS)
        return SessionSettings(
            provider=str(value.get("provider", "mock")),
            model=str(value.get("model", "mock/dex")),
            system_prompt=str(value.get("system_prompt") or DEFAULT_SYSTEM_PROMPT),
            context_tokens=tokens if isinstance(tokens, int) else DEFAULT_CONTEXT_TOKENS,
            enabled_tools=tuple(str(name) for name in cast("list[Any]", tools))
            if isinstance(tools, list)
            else (),
        )


class SessionModelClient:
    """A session's view of its model: only the tools it enabled (plus the built-ins),
    and token counts scaled from its own context window to the Flow's."""

    def __init__(self, inner: ModelClient, settings: SessionSettings) -> None:
        self._inner = inner
        self._enabled = set(settings.enabled_tools) | set(BUILT_IN_TOOLS)
        self._scale = REFERENCE_CONTEXT_TOKENS / settings.context_tokens

    def _scoped(self, request: ModelRequest) -> ModelRequest:
        tools = tuple(tool for tool in request.tools if tool.name in self._enabled)
        return dataclasses.replace(request, tools=tools)

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        return await self._inner.generate(self._scoped(request), stream)

    def count_input_tokens(self, request: ModelRequest) -> int:
        # One token per four characters, as Stepwise estimates without a counter.
        characters = len(request.instructions) + sum(len(repr(item)) for item in request.items)
        return max(1, round(characters / 4 * self._scale))


class ModelResolver:
    """Builds each provider's client once per model name, from the Worker's environment."""

    def __init__(self) -> None:
        self._clients: dict[str, ModelClient] = {}

    def client_for(self, provider: str, model: str) -> ModelClient:
        key = f"{provider}:{model}"
        if key not in self._clients:
            self._clients[key] = _build_client(provider, model)
        return self._clients[key]

    def __call__(self, settings: Mapping[str, Any]) -> ModelClient:
        session = SessionSettings.from_json(settings)
        return SessionModelClient(self.client_for(session.provider, session.model), session)


def _build_client(provider: str, model: str) -> ModelClient:
    return create_model_client(provider, model) or create_mock_model()


def _instructions(context: InstructionContext) -> str:
    return SessionSettings.from_json(context.session_settings).system_prompt


def create_ai_agent_flow(
    catalog: ToolCatalog, *, retained_message_limit: int = DEFAULT_RETAINED_MESSAGES
) -> AgentSessionFlow:
    """The app's session Flow: Stepwise, plan mode, ask_user, durable_wait, compaction."""
    definition = AgentDefinition(
        name="ai-agent",
        instructions=_instructions,
        model=create_mock_model(),
        resolve_model=ModelResolver(),
        tools=catalog.function_tools,
        tool_sources=catalog.tool_sources,
        built_in_tools=list(BUILT_IN_TOOLS),
        plan_mode_enabled=True,
        compaction=CompactionPolicy(
            context_window_tokens=REFERENCE_CONTEXT_TOKENS,
            trigger_ratio=TRIGGER_RATIO,
            retained_ratio=RETAINED_RATIO,
        ),
    )
    # A question ends its reply, as the brief's tool routing asks: the calls after it
    # (a durable_wait from `/ask-many`) are recorded as not run.
    # Their reason "superseded_by_user_input" is a Python extension TS readers must tolerate.
    return create_stepwise_session_flow(
        definition,
        FLOW_TYPE,
        retained_message_limit=retained_message_limit,
        question_supersedes_later_calls=True,
    )


def create_demo_flow() -> AgentSessionFlow:
    """The Flow with the demo tool servers and default retention: a zero-argument
    factory, for Worker processes started apart from the web app."""
    return create_ai_agent_flow(ToolCatalog.build((), demo_servers=True))
