"""``create_claude_agent_session_flow``: the session Flow of a Claude agent (``anthropic`` SDK)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.session import AgentSessionFlow, create_agent_session_flow
from dex_agents.session.options import AgentSessionOptions
from dex_agents_claude_sdk.runner import DEFAULT_MAX_TOKENS, ClaudeAgentRunner, ClientFactory
from dex_agents_claude_sdk.tools import ToolLike

__all__ = ["create_claude_agent_session_flow"]


def create_claude_agent_session_flow(
    flow_type: str,
    *,
    model: str,
    tools: Sequence[ToolLike] = (),
    system_prompt: str | Sequence[Mapping[str, Any]] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    thinking: Mapping[str, Any] | None = None,
    temperature: float | None = None,
    request_options: Mapping[str, Any] | None = None,
    client_factory: ClientFactory | None = None,
    api_key_env: str = "ANTHROPIC_API_KEY",
    options: AgentSessionOptions | None = None,
    **session_options: Any,
) -> AgentSessionFlow:
    """A new session Flow of ``flow_type`` that runs Claude with ``tools``.

    Each ``RunModel`` makes one streamed Messages API request to ``model``.
    ``client_factory`` builds the ``anthropic.AsyncAnthropic`` client in each
    Worker process; without it the key comes from ``api_key_env``. Session options
    go in ``options`` or as keywords (``tool_policies=``, ``interrupt_deadline=``, ...).
    """
    runner = ClaudeAgentRunner(
        model,
        tools=tools,
        system_prompt=system_prompt,
        max_tokens=max_tokens,
        thinking=thinking,
        temperature=temperature,
        request_options=request_options,
        client_factory=client_factory,
        api_key_env=api_key_env,
    )
    return create_agent_session_flow(runner, flow_type, options, **session_options)
