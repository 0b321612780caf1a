"""An agent on one ``McpToolSource`` with a stdio and a Streamable HTTP server.

The tools are wrapped as in the README's "MCP tools" section; both servers log every
call with the idempotency key they received in ``_meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.runner import get_deferred_tool_execution
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_server import StdioAndHttpMcpServers
from dex_agents_pydantic_ai import create_pydantic_ai_session_flow


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[StdioAndHttpMcpServers]:
    with StdioAndHttpMcpServers(tmp_path) as servers:
        yield servers


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
            ToolCallPart("files__lookup", {"order_id": "42"}, tool_call_id="c1"),
            ToolCallPart("tickets__set_value", {"key": "a", "value": "1"}, tool_call_id="c2"),
        ]
    )


async def test_tools_of_a_stdio_and_an_http_server_run_in_tool_steps_with_the_key(
    servers: StdioAndHttpMcpServers,
) -> None:
    tools = servers.source
    agent = Agent(
        FunctionModel(model), tools=[as_tool(tools, tool) for tool in await tools.list_tools()]
    )
    flow = create_pydantic_ai_session_flow(
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
