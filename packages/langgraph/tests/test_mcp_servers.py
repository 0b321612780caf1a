"""An agent on one ``McpToolSource`` with a stdio and a Streamable HTTP server.

The tools are wrapped as in the README's "MCP tools" section; both servers log every
call with the idempotency key they received in ``_meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from dex_agents import AgentHost
from dex_agents.mcp import McpTool, McpToolSource
from dex_agents.testing import executed_step_types, read_step_history
from dex_agents.testing.mcp_server import StdioAndHttpMcpServers
from dex_agents_langgraph import create_langgraph_session_flow, idempotency_key_of


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[StdioAndHttpMcpServers]:
    with StdioAndHttpMcpServers(tmp_path) as servers:
        yield servers


def as_structured_tool(tools: McpToolSource, tool: McpTool) -> StructuredTool:
    async def invoke(config: RunnableConfig, **arguments: Any) -> str:
        key = idempotency_key_of(config)
        return await tools.call_tool(tool.name, arguments, idempotency_key=key)

    return StructuredTool.from_function(
        coroutine=invoke,
        name=tool.name,
        description=tool.description,
        args_schema=dict(tool.parameters),
    )


class OfflineChatModel(BaseChatModel):
    """Calls one tool of each server, then answers with both results."""

    @property
    def _llm_type(self) -> str:
        return "offline"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            answer = AIMessage(content=" | ".join(str(m.content) for m in results))
        else:
            calls = [
                {"name": "files__lookup", "args": {"order_id": "42"}, "id": "c1"},
                {"name": "tickets__set_value", "args": {"key": "a", "value": "1"}, "id": "c2"},
            ]
            answer = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:
        return self


async def test_tools_of_a_stdio_and_an_http_server_run_in_tool_steps_with_the_key(
    servers: StdioAndHttpMcpServers,
) -> None:
    tools = servers.source
    flow = create_langgraph_session_flow(
        OfflineChatModel(),
        "McpTwoServers",
        tools=[as_structured_tool(tools, tool) for tool in await tools.list_tools()],
        tool_policies={**await tools.tool_policies()},
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
