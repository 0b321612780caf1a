"""The version switch, the no-SDK and no-API cases, and option checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ui_support import UIScriptRunner, build_ui_flow, new_session_id

from dex_agents import AgentHost, AgentSessionOptions, create_agent_session_flow
from dex_agents.tracing import GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS, TracingOptions


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_importing_the_session_and_tracing_never_imports_opentelemetry() -> None:
    code = (
        "import sys\n"
        "import dex_agents, dex_agents.tracing\n"
        "from dex_agents.tracing import SessionTracer, StepIdentity, TracingOptions\n"
        "tracer = SessionTracer(TracingOptions(is_enabled=False), 'Agent')\n"
        "step = StepIdentity('f', 'r', 'RunModel', 'e', 1, 'turn-1')\n"
        "assert tracer.activation(step, None) is None\n"
        "print('opentelemetry' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_without_the_api_installed_the_spans_are_skipped() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from dex_agents.tracing import SessionTracer, StepIdentity, TracingOptions\n"
        "tracer = SessionTracer(TracingOptions(), 'Agent')\n"
        "step = StepIdentity('f', 'r', 'RunModel', 'e', 1, 'turn-1')\n"
        "print(tracer.activation(step, None))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "None"


def test_an_unknown_conventions_version_is_refused() -> None:
    with pytest.raises(ValueError, match="semantic_conventions_version"):
        TracingOptions(semantic_conventions_version="1.0")  # type: ignore[arg-type]


async def test_with_the_api_but_no_sdk_nothing_is_stored(engine) -> None:
    # No provider set: the global one is the API's no-op proxy.
    flow = build_ui_flow(UIScriptRunner())
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "charge")
        await sessions.wait_for_interrupt(sid)
        snapshot = await sessions.snapshot(sid)
    assert [record.trace_context for record in snapshot.tool_calls] == [None, None]


async def test_the_1_36_conventions_use_the_older_names_and_no_content(engine) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingOptions(
        tracer_provider=provider,
        semantic_conventions_version="1.36.0",
        capture_message_content=True,
    )
    runner = UIScriptRunner()
    flow = create_agent_session_flow(runner, "LegacyTraced", AgentSessionOptions(tracing=tracing))
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "hello")
        await sessions.wait_for_turn(sid)
    spans = exporter.get_finished_spans()
    (chat,) = [span for span in spans if span.name == "chat"]
    assert (
        chat.instrumentation_scope.schema_url == GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS["1.36.0"]
    )
    assert "gen_ai.input.messages" not in chat.attributes
    assert "gen_ai.usage.cache_read.input_tokens" not in chat.attributes
    assert chat.attributes["gen_ai.usage.output_tokens"] == 2
    (root,) = [span for span in spans if span.name == "invoke_agent LegacyTraced"]
    assert root.attributes["gen_ai.agent.name"] == "LegacyTraced"
