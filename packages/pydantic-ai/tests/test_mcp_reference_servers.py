"""The README's MCP wrapping against official MCP reference servers, nobody here wrote.

``@modelcontextprotocol/server-everything`` from npm (pinned in the core's
``tests/mcp/reference_servers`` lock file) and ``mcp-server-time`` from PyPI, both over
stdio, behind one ``McpToolSource``; skips, saying why, without node and npm.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_reference import ReferenceServers, time_server
from dex_agents_pydantic_ai import create_pydantic_ai_session_flow


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


def as_tool(tools: McpToolSource, tool: McpTool) -> Tool[Any]:
    async def invoke(**arguments: Any) -> str:
        key = get_deferred_tool_execution().idempotency_key
        return await tools.call_tool(tool.name, arguments, idempotency_key=key)

    return Tool.from_schema(invoke, tool.name, tool.description, dict(tool.parameters))


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" | ".join(str(r.content) for r in returns))])
    return ModelResponse(
        parts=[
            ToolCallPart("everything__get-sum", {"a": 2, "b": 3}, tool_call_id="c1"),
            ToolCallPart("time__get_current_time", {"timezone": "UTC"}, tool_call_id="c2"),
        ]
    )


async def test_reference_server_tools_run_in_tool_steps(tools: McpToolSource) -> None:
    agent = Agent(
        FunctionModel(model), tools=[as_tool(tools, tool) for tool in await tools.list_tools()]
    )
    flow = create_pydantic_ai_session_flow(
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
