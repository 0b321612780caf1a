"""A traced session Flow for Worker child processes: every finished span is appended as one
JSON line to ``$TRACE_SPANS_FILE``, so the test reads the spans of every process.

The model asks for two read tools at once; each waits until the other started, so with one
Step slot per Worker (``max_concurrent_tasks=2`` keeps the other for RPCs) the two calls run
in two Worker processes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from ui_support import framework_message

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentUsage,
    ToolEffect,
    ToolPolicy,
    create_agent_session_flow,
)
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.tracing import TracingOptions
from dex_agents.values import FrameworkMessage

FLOW_TYPE = "TracedParallelAgent"
USAGE = AgentUsage(model_calls=1, input_tokens=7, output_tokens=3, total_tokens=10)
METADATA = ModelCallMetadata(request_model="scripted-1", provider_name="scripted")


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a", encoding="utf-8") as file:
            for span in spans:
                context = span.get_span_context()
                assert context is not None
                record = {
                    "pid": os.getpid(),
                    "name": span.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
                    "links": [f"{link.context.span_id:016x}" for link in span.links],
                    "kind": span.kind.name,
                    "attributes": dict(span.attributes or {}),
                }
                file.write(json.dumps(record, default=list) + "\n")
        return SpanExportResult.SUCCESS


class ParallelToolsRunner:
    def __init__(self, gate_directory: Path) -> None:
        self.gates = gate_directory

    def build_user_message(self, text: str) -> FrameworkMessage:
        return framework_message("user", text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            calls = [
                DeferredToolCall(name, name, "{}", turn.resolve_tool_policy(name))
                for name in ("first", "second")
            ]
            return ToolCallsRequested("round-1", calls, USAGE, model_call_metadata=METADATA)
        outputs = ", ".join(r.output or "" for r in turn.tool_calls)
        return TurnCompleted(
            [framework_message("assistant", f"both done: {outputs}")],
            USAGE,
            model_call_metadata=METADATA,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        # Each tool waits until the other started: they run at once, so (one Step slot per
        # Worker) in two Workers. Had only one waited, one Worker could run both in turn.
        name = call.tool_call.tool_name
        other = "second" if name == "first" else "first"
        (self.gates / f"{name}-started").write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not (self.gates / f"{other}-started").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{other} never started")
            await _sleep(0.05)
        return ToolExecutionResult(f"{name} in {os.getpid()}")


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def traced_parallel_flow() -> AgentSessionFlow:
    spans = os.environ.get("TRACE_SPANS_FILE")
    provider = TracerProvider()
    if spans:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(Path(spans))))
    gates = Path(os.environ.get("TRACE_GATES", "."))
    options = AgentSessionOptions(
        tool_policies={name: ToolPolicy(ToolEffect.READ) for name in ("first", "second")},
        tracing=TracingOptions(tracer_provider=provider, agent_name="Parallel"),
    )
    return create_agent_session_flow(ParallelToolsRunner(gates), FLOW_TYPE, options)
