"""An agent on one ``McpToolSource`` with a stdio and a Streamable HTTP server.

The tools are wrapped as in the README's "MCP tools" section; both servers log every
call with the idempotency key they received in ``_meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_server import StdioAndHttpMcpServers
from dex_agents_openai_agents import create_openai_agents_session_flow


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[StdioAndHttpMcpServers]:
    with StdioAndHttpMcpServers(tmp_path) as servers:
        yield servers


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
            function_call("files__lookup", {"order_id": "42"}, call_id="c1"),
            function_call("tickets__set_value", {"key": "a", "value": "1"}, call_id="c2"),
        ]
    )


async def test_tools_of_a_stdio_and_an_http_server_run_in_tool_steps_with_the_key(
    servers: StdioAndHttpMcpServers,
) -> None:
    tools = servers.source
    agent = Agent(
        name="orders",
        model=ScriptedModel([ModelStep.respond(reply) for _ in range(10)]),
        tools=[as_function_tool(tools, tool) for tool in await tools.list_tools()],
    )
    flow = create_openai_agents_session_flow(
        agent, "McpTwoServers", tool_policies={**await tools.tool_policies()}
    )
    async with AgentHost(flow) as host:
        sessions = host.client()
        await sessions.start_session("mcp-2", "Where is order 42? And set a to 1.")
        snapshot = await sessions.wait_for_turn("mcp-2")
        history = await read_step_history(host.server_address, "mcp-2")

    assert executed_step_types(history).count("CallTool") == 2
    assert servers.calls("files") == [("lookup", "mcp-2/turn-1/c1")]
    assert servers.calls("tickets") == [("set_value", "mcp-2/turn-1/c2")]
    assert snapshot.messages[-1].text == "order 42: shipped | a = 1"
