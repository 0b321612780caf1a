"""An agent on one ``McpToolSource`` with a stdio and a Streamable HTTP server.

The tools are wrapped as in the README's "MCP tools" section; both servers log every
call with the idempotency key they received in ``_meta``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_server import StdioAndHttpMcpServers
from dex_agents_claude_sdk import ClaudeTool, claude_tool, create_claude_session_flow
from dex_agents_claude_sdk.testing import mock_client_factory, response_message, sse_response


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[StdioAndHttpMcpServers]:
    with StdioAndHttpMcpServers(tmp_path) as servers:
        yield servers


def as_claude_tool(tools: McpToolSource, tool: McpTool) -> ClaudeTool:
    async def invoke(**arguments: Any) -> str:
        key = get_deferred_tool_execution().idempotency_key
        return await tools.call_tool(tool.name, arguments, idempotency_key=key)

    return claude_tool(
        invoke, name=tool.name, description=tool.description, input_schema=tool.parameters
    )


async def messages_api(request: httpx2.Request) -> httpx2.Response:
    last = json.loads(request.content)["messages"][-1]["content"]
    results = [block["content"] for block in last if block.get("type") == "tool_result"]
    if results:
        return sse_response(response_message([{"type": "text", "text": " | ".join(results)}]))
    calls = [
        {"type": "tool_use", "id": "toolu_1", "name": "files__lookup", "input": {"order_id": "42"}},
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "tickets__set_value",
            "input": {"key": "a", "value": "1"},
        },
    ]
    return sse_response(response_message(calls))


async def test_tools_of_a_stdio_and_an_http_server_run_in_tool_steps_with_the_key(
    servers: StdioAndHttpMcpServers,
) -> None:
    tools = servers.source
    flow = create_claude_session_flow(
        "claude-test",
        "McpTwoServers",
        tools=[as_claude_tool(tools, tool) for tool in await tools.list_tools()],
        client_factory=mock_client_factory(messages_api),
        tool_policies={**await tools.tool_policies()},
    )
    async with AgentHost(flow) as host:
        sessions = host.client()
        await sessions.start_session("mcp-2", "Where is order 42? And set a to 1.")
        snapshot = await sessions.wait_for_turn("mcp-2")
        history = await read_step_history(host.server_address, "mcp-2")

    assert executed_step_types(history).count("CallTool") == 2
    assert servers.calls("files") == [("lookup", "mcp-2/turn-1/toolu_1")]
    assert servers.calls("tickets") == [("set_value", "mcp-2/turn-1/toolu_2")]
    assert snapshot.messages[-1].text == "order 42: shipped | a = 1"
