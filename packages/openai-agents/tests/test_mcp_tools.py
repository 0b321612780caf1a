"""Tools of a local MCP server the agent lists are deferred like function tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool
from agents.mcp import MCPServerStdio
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents import ToolEffect
from dex_agents.runner import ResolvedToolPolicy, ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents.testing.mcp_server import read_calls
from dex_agents_openai_agents import OpenAIAgentsRunner

SERVER = Path(__file__).parent / "mcp_orders_server.py"
# openai-agents before 0.24 keeps an MCP tool's annotations private (0.24 made them public as
# FunctionTool.mcp_annotations): there, MCP tools declare no effect and the defaults apply.
MCP_ANNOTATIONS = hasattr(FunctionTool, "mcp_annotations")


async def test_mcp_tools_run_only_in_the_tool_step(tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("lookup_order", {"order_id": "42"}, call_id="c1"),
                    function_call("cancel_order", {"order_id": "42"}, call_id="c2"),
                ]
            ),
            ModelStep(output=[assistant_message("Done.")]),
        ]
    )
    params: Any = {"command": sys.executable, "args": [str(SERVER), str(runs)]}
    async with MCPServerStdio(params, name="orders", client_session_timeout_seconds=30) as server:
        agent = Agent[Any](name="support", model=model, mcp_servers=[server])
        session = Session(OpenAIAgentsRunner(agent), default_effect=ToolEffect.IDEMPOTENT_WRITE)
        session.start_turn("look up and cancel 42")

        outcome = await session.run_model()
        assert isinstance(outcome, ToolCallsRequested)
        assert not runs.exists(), "no MCP tool runs in the model step"
        policies = {call.tool_name: call.policy for call in outcome.tool_calls}
        lookup_effect = ToolEffect.READ if MCP_ANNOTATIONS else ToolEffect.IDEMPOTENT_WRITE
        assert policies == {
            "lookup_order": ResolvedToolPolicy(lookup_effect, False),  # readOnlyHint
            "cancel_order": ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),
        }

        await session.run_tools()
        assert runs.read_text().splitlines() == ["lookup_order 42", "cancel_order 42"]
        assert [r.output for r in session.records] == [
            "order 42 shipped",
            "order 42 cancelled",
        ]
        final = await session.run_model()
        assert isinstance(final, TurnCompleted)
        assert runs.read_text().splitlines() == ["lookup_order 42", "cancel_order 42"]
        assert model.calls[1].input[-2:] == [
            {"call_id": "c1", "output": "order 42 shipped", "type": "function_call_output"},
            {"call_id": "c2", "output": "order 42 cancelled", "type": "function_call_output"},
        ]


async def test_deferred_mcp_calls_carry_the_idempotency_key_and_traceparent_in_meta(
    tmp_path: Path,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    calls = tmp_path / "calls.jsonl"
    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("set_value", {"key": "a", "value": "1"}, call_id="c1")]
            ),
            ModelStep(output=[assistant_message("Done.")]),
        ]
    )
    params: Any = {
        "command": sys.executable,
        "args": ["-m", "dex_agents.testing.mcp_server", "--log", str(calls)],
    }
    async with MCPServerStdio(params, name="files", client_session_timeout_seconds=60) as server:
        agent = Agent[Any](name="support", model=model, mcp_servers=[server])
        session = Session(OpenAIAgentsRunner(agent))
        session.start_turn("set a")
        outcome = await session.run_model()
        assert isinstance(outcome, ToolCallsRequested)
        # idempotentHint: the same annotation rule as dex_agents.mcp
        expected = ToolEffect.IDEMPOTENT_WRITE if MCP_ANNOTATIONS else ToolEffect.UNCLASSIFIED
        assert outcome.tool_calls[0].policy.effect is expected
        # The session runs each tool Step inside its execute_tool span; stand in for it.
        with TracerProvider().get_tracer("test").start_as_current_span("execute_tool") as span:
            await session.run_tools()
            context = span.get_span_context()
    assert session.records[0].output == "a = 1"
    (call,) = read_calls(calls)
    assert call["idempotency_key"] == f"{session.flow_id}/{session.records[0].turn_id}/c1"
    flags = int(context.trace_flags)
    assert call["traceparent"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
