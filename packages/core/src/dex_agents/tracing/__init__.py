"""OpenTelemetry GenAI spans of a session (the ``otel`` extra: ``dex-agents[otel]``).

Set ``AgentSessionOptions.tracing`` to a ``TracingOptions`` to change the defaults.
Importing this package never imports OpenTelemetry; the spans load it when the
first one is emitted, and without ``opentelemetry-api`` nothing is emitted.
"""

from dex_agents.tracing._options import (
    GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS,
    SemanticConventionsVersion,
    TracingOptions,
)
from dex_agents.tracing._spans import (
    INSTRUMENTATION_SCOPE,
    SessionTracer,
    StepIdentity,
    current_traceparent,
)

__all__ = [
    "GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS",
    "INSTRUMENTATION_SCOPE",
    "SemanticConventionsVersion",
    "SessionTracer",
    "StepIdentity",
    "TracingOptions",
    "current_traceparent",
]
