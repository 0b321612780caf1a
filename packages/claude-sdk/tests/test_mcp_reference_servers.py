"""The README's MCP wrapping against official MCP reference servers, nobody here wrote.

``@modelcontextprotocol/server-everything`` from npm (pinned in the core's
``tests/mcp/reference_servers`` lock file) and ``mcp-server-time`` from PyPI, both over
stdio, behind one ``McpToolSource``; skips, saying why, without node and npm.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_reference import ReferenceServers, time_server
from dex_agents_claude_sdk import ClaudeTool, claude_tool, create_claude_session_flow
from dex_agents_claude_sdk.testing import mock_client_factory, response_message, sse_response


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
        texts = [r if isinstance(r, str) else r[0]["text"] for r in results]
        return sse_response(response_message([{"type": "text", "text": " | ".join(texts)}]))
    calls = [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "everything__get-sum",
            "input": {"a": 2, "b": 3},
        },
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "time__get_current_time",
            "input": {"timezone": "UTC"},
        },
    ]
    return sse_response(response_message(calls))


async def test_reference_server_tools_run_in_tool_steps(tools: McpToolSource) -> None:
    flow = create_claude_session_flow(
        "claude-test",
        "McpReference",
        tools=[as_claude_tool(tools, tool) for tool in await tools.list_tools()],
        client_factory=mock_client_factory(messages_api),
        tool_policies={**await tools.tool_policies()},
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
