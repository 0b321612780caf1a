"""The README's MCP wrapping against official MCP reference servers, nobody here wrote.

``@modelcontextprotocol/server-everything`` from npm (pinned in the core's
``tests/mcp/reference_servers`` lock file) and ``mcp-server-time`` from PyPI, both over
stdio, behind one ``McpToolSource``; skips, saying why, without node and npm.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, FunctionTool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_reference import ReferenceServers, time_server
from dex_agents_openai_agents import create_openai_agents_session_flow


@pytest.fixture
async def tools() -> AsyncIterator[McpToolSource]:
    reference, reason = ReferenceServers.install()
    if reference is None:
        pytest.skip(reason)
    source = McpToolSource([reference.everything(), time_server()], listing_timeout_seconds=60)
    try:
        yield source
    finally:
        await source.aclose()


def as_function_tool(tools: McpToolSource, tool: McpTool) -> FunctionTool:
    async def invoke(context: Any, arguments: str) -> str:
        key = get_deferred_tool_execution().idempotency_key
        return await tools.call_tool(tool.name, arguments, idempotency_key=key)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=dict(tool.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def reply(call: ModelCall) -> ModelStep:
    outputs = [item["output"] for item in call.input if item.get("type") == "function_call_output"]
    if outputs:
        return ModelStep(output=[assistant_message(" | ".join(outputs))])
    return ModelStep(
        output=[
            function_call("everything__get-sum", {"a": 2, "b": 3}, call_id="c1"),
            function_call("time__get_current_time", {"timezone": "UTC"}, call_id="c2"),
        ]
    )


async def test_reference_server_tools_run_in_tool_steps(tools: McpToolSource) -> None:
    agent = Agent(
        name="reference",
        model=ScriptedModel([ModelStep.respond(reply) for _ in range(10)]),
        tools=[as_function_tool(tools, tool) for tool in await tools.list_tools()],
    )
    flow = create_openai_agents_session_flow(
        agent, "McpReference", tool_policies={**await tools.tool_policies()}
    )
    async with AgentHost(flow) as host:
        sessions = host.client()
        await sessions.start_session("mcp-ref", "What is 2 + 3, and what time is it?")
        snapshot = await sessions.wait_for_turn("mcp-ref")
        history = await read_step_history(host.server_address, "mcp-ref")

    assert executed_step_types(history).count("CallTool") == 2
    answer = snapshot.messages[-1].text or ""
    assert "The sum of 2 and 3 is 5" in answer
    assert '"timezone": "UTC"' in answer
