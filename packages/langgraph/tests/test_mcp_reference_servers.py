"""The README's MCP wrapping against official MCP reference servers, nobody here wrote.

``@modelcontextprotocol/server-everything`` from npm (pinned in the core's
``tests/mcp/reference_servers`` lock file) and ``mcp-server-time`` from PyPI, both over
stdio, behind one ``McpToolSource``; skips, saying why, without node and npm.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from dex_agents.testing.mcp_reference import ReferenceServers, time_server
from dex_agents_langgraph import create_langgraph_session_flow, idempotency_key_of


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
                {"name": "everything__get-sum", "args": {"a": 2, "b": 3}, "id": "c1"},
                {"name": "time__get_current_time", "args": {"timezone": "UTC"}, "id": "c2"},
            ]
            answer = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:
        return self


async def test_reference_server_tools_run_in_tool_steps(tools: McpToolSource) -> None:
    flow = create_langgraph_session_flow(
        OfflineChatModel(),
        "McpReference",
        tools=[as_structured_tool(tools, tool) for tool in await tools.list_tools()],
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
