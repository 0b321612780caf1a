"""``TracingOptions``: how a session emits OpenTelemetry GenAI spans (no OpenTelemetry import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS",
    "SemanticConventionsVersion",
    "TracingOptions",
]

SemanticConventionsVersion = Literal["1.42.0-dev", "1.36.0"]
"""The GenAI semantic conventions a tracer can write."""

GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS: dict[str, str] = {
    "1.42.0-dev": "https://opentelemetry.io/schemas/1.42.0-dev",
    "1.36.0": "https://opentelemetry.io/schemas/1.36.0",
}
"""The schema URL set on the tracer for each supported conventions version."""


@dataclass(frozen=True, kw_only=True)
class TracingOptions:
    """Tracing of one session Flow (``AgentSessionOptions.tracing``).

    Attributes:
        is_enabled: ``False`` emits nothing and never imports OpenTelemetry.
        tracer_provider: The provider to emit with; the global provider by default.
        agent_name: ``gen_ai.agent.name`` and the ``invoke_agent`` span name; the Flow type
            by default.
        capture_message_content: Put message text, tool arguments and tool results on
            spans. Off by default: spans carry message keys and tool call IDs instead.
        semantic_conventions_version: ``"1.42.0-dev"`` (GenAI conventions at commit
            dc3571562603552dc555c667dfa327a638d94ab2) or ``"1.36.0"`` for backends that
            read the older names (``gen_ai.system``, no cache or reasoning counts, no content).
    """

    is_enabled: bool = True
    tracer_provider: Any = None
    agent_name: str | None = None
    capture_message_content: bool = False
    semantic_conventions_version: SemanticConventionsVersion = "1.42.0-dev"

    def __post_init__(self) -> None:
        if self.semantic_conventions_version not in GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS:
            known = ", ".join(sorted(GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS))
            raise ValueError(
                f"unknown semantic_conventions_version {self.semantic_conventions_version!r}; "
                f"use one of {known}"
            )
