"""GenAI spans of a real session, exported to the SDK's in-memory exporter."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ui_support import UIScriptRunner, build_ui_flow, new_session_id

from dex_agents import AgentHost
from dex_agents.tracing import TracingOptions


def traced_flow(provider: TracerProvider, **options: object):
    flow = build_ui_flow(UIScriptRunner())
    tracing = TracingOptions(tracer_provider=provider, agent_name="Shop", **options)  # type: ignore[arg-type]
    from dex_agents import create_agent_session_flow

    return create_agent_session_flow(
        flow.runner, "TracedAgent", replace(flow.options, tracing=tracing)
    )


def spans_by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


async def test_one_turn_with_an_approval_is_two_linked_traces(engine) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = traced_flow(provider)
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "charge")
        interrupt = await sessions.wait_for_interrupt(sid)
        await sessions.approve(sid, interrupt.interrupt_id)
        await sessions.wait_for_turn(sid)
    spans = spans_by_name(exporter)
    first, second = spans["invoke_agent Shop"]
    assert first.parent is None
    assert second.parent is None
    assert first.attributes["dex.step.type"] == "StartAgentSession"
    assert second.attributes["dex.step.type"] == "AwaitToolApproval"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    chats = spans["chat"]
    assert len(chats) == 2
    assert chats[0].parent.span_id == first.context.span_id
    assert chats[1].parent.span_id == second.context.span_id
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 3
    assert chats[0].attributes["dex.agent.requested_tool_call.ids"] == ("r1", "w1")
    assert "gen_ai.input.messages" not in chats[0].attributes
    lookup = spans["execute_tool lookup"][0]
    charge = spans["execute_tool charge"][0]
    assert lookup.parent.span_id == first.context.span_id  # joins the model call's trace
    assert lookup.context.trace_id == first.context.trace_id
    assert charge.parent.span_id == second.context.span_id  # the approval's own root
    assert charge.attributes["gen_ai.tool.call.id"] == "w1"
    for span in exporter.get_finished_spans():
        assert span.attributes["gen_ai.conversation.id"] == sid
        assert span.attributes["dex.agent.turn.id"] == "turn-1"
        assert span.instrumentation_scope.name == "dex-agents"


class FailingProcessor(SpanProcessor):
    def on_start(self, span, parent_context=None) -> None:
        raise RuntimeError("processor down")

    def on_end(self, span) -> None:
        raise RuntimeError("processor down")


async def test_a_failing_span_processor_never_fails_a_step(engine, caplog) -> None:
    provider = TracerProvider()
    provider.add_span_processor(FailingProcessor())
    flow = traced_flow(provider)
    sid = new_session_id()
    with caplog.at_level(logging.DEBUG, logger="dex_agents.tracing"):
        async with AgentHost(flow, server_address=engine.address) as host:
            sessions = host.client()
            await sessions.start_session(sid, "hello")
            snapshot = await sessions.wait_for_turn(sid)
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "Hello there"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings
    assert "processor down" in warnings[0].getMessage()


@pytest.mark.parametrize("capture", [True, False])
async def test_content_is_captured_only_when_asked(engine, capture: bool) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = traced_flow(provider, capture_message_content=capture)
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "hello")
        await sessions.wait_for_turn(sid)
    (chat,) = spans_by_name(exporter)["chat"]
    assert chat.attributes["dex.agent.input_messages.last_key"] == "000000000001"
    assert chat.attributes["dex.agent.output_messages.keys"] == ("000000000002",)
    assert ("gen_ai.input.messages" in chat.attributes) is capture
    if capture:
        assert "hello" in chat.attributes["gen_ai.input.messages"]
        assert "Hello there" in chat.attributes["gen_ai.output.messages"]


class FlakyModelRunner(UIScriptRunner):
    """The first model call fails; the retry answers."""

    async def run_model_step(self, turn):
        if turn.attempt == 1:
            raise ConnectionError("model endpoint reset")
        return await super().run_model_step(turn)


async def test_a_failed_model_attempt_is_an_error_span_and_the_retry_its_own(engine) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    from dex_agents import AgentSessionOptions, create_agent_session_flow

    tracing = TracingOptions(tracer_provider=provider)
    flow = create_agent_session_flow(
        FlakyModelRunner(), "FlakyTraced", AgentSessionOptions(tracing=tracing)
    )
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "hello")
        await sessions.wait_for_turn(sid)
    failed, retried = spans_by_name(exporter)["chat"]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "ConnectionError"
    assert failed.attributes["dex.step.attempt"] == 1
    assert retried.status.status_code.name == "UNSET"
    assert retried.attributes["dex.step.attempt"] == 2
    same_execution = failed.attributes["dex.step.execution_id"]
    assert retried.attributes["dex.step.execution_id"] == same_execution


async def test_the_compaction_summary_call_is_a_chat_span_of_compact_context(engine) -> None:
    from dex_agents import CompactionPolicy
    from dex_agents.models import ModelRequest, ScriptedModelClient
    from dex_agents.runner import CONTEXT_SUMMARY_INSTRUCTIONS
    from dex_agents.stepwise import AgentDefinition, StepwiseRunner, session_options_of

    def script(request: ModelRequest) -> str:
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            return "the user asked questions"
        return "answer " + "lorem ipsum " * 20

    definition = AgentDefinition(
        name="long",
        instructions="Answer.",
        model=ScriptedModelClient(script),
        compaction=CompactionPolicy(context_window_tokens=400),
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingOptions(
        tracer_provider=provider, agent_name="Long", capture_message_content=True
    )
    from dex_agents import create_agent_session_flow

    flow = create_agent_session_flow(
        StepwiseRunner(definition),
        "TracedCompaction",
        replace(session_options_of(definition), tracing=tracing),
    )
    sid = new_session_id()
    async with AgentHost(flow, server_address=engine.address) as host:
        sessions = host.client()
        await sessions.start_session(sid, "question 1")
        for turn in range(2, 5):
            assert await sessions.send_user_message(sid, f"question {turn}")
        snapshot = await sessions.wait_for_turn(sid, 4)
    assert snapshot.context_summary is not None
    spans = exporter.get_finished_spans()
    summaries = [s for s in spans if s.attributes["dex.step.type"] == "CompactContext"]
    assert summaries
    summary = summaries[0]
    assert summary.name.startswith("chat")
    assert summary.attributes["gen_ai.operation.name"] == "chat"
    assert summary.attributes["gen_ai.conversation.id"] == sid
    assert summary.attributes["gen_ai.usage.input_tokens"] > 0
    assert "question 1" in summary.attributes["gen_ai.input.messages"]
    assert "the user asked questions" in summary.attributes["gen_ai.output.messages"]
    assert "dex.agent.output_messages.keys" not in summary.attributes
    # The summary call joins its turn's activation, like the turn's model calls.
    roots = {s.context.span_id: s for s in spans if s.name == "invoke_agent Long"}
    assert summary.parent is not None
    assert summary.parent.span_id in roots
    assert (
        roots[summary.parent.span_id].attributes["dex.agent.turn.id"]
        == (summary.attributes["dex.agent.turn.id"])
    )
