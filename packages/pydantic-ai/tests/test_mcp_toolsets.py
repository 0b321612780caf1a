"""Deferred calls of an agent's MCP toolset carry the session key in ``_meta`` and take the
effect of the tool's MCP annotations.

Pydantic AI's own ``MCPToolset`` needs FastMCP, which this workspace does not install, so
the toolset here follows its contract (``annotations`` in the tool metadata, a
``process_tool_call`` hook around ``direct_call_tool(name, args, metadata=...)``) on the
``mcp`` SDK's client, against the real test MCP server over stdio.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from dex_agents import ToolEffect
from dex_agents.runner import ResolvedToolPolicy, ToolCallsRequested
from dex_agents.testing import RunnerDriver as Session
from dex_agents.testing.mcp_server import read_calls
from dex_agents_pydantic_ai import PydanticAIRunner

_ANY = SchemaValidator(core_schema.dict_schema())


class StdioMcpToolset(AbstractToolset[Any]):
    """An MCP toolset on the ``mcp`` SDK, shaped like Pydantic AI's ``MCPToolset``."""

    def __init__(self, server: StdioServerParameters) -> None:
        self.server = server
        self.process_tool_call: Any = None

    @property
    def id(self) -> str | None:
        return "stdio-mcp"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        async with Client(self.server, cache=None) as client:
            listed = (await client.list_tools()).tools
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=dict(tool.input_schema),
                    metadata={
                        "annotations": tool.annotations.model_dump(by_alias=True)
                        if tool.annotations
                        else None
                    },
                ),
                max_retries=0,
                args_validator=_ANY,
            )
            for tool in listed
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.process_tool_call is not None:
            return await self.process_tool_call(ctx, self.direct_call_tool, name, tool_args)
        return await self.direct_call_tool(name, tool_args)

    async def direct_call_tool(
        self, name: str, args: dict[str, Any], *, metadata: dict[str, Any] | None = None
    ) -> Any:
        async with Client(self.server, cache=None) as client:
            result = await client.call_tool(name, args, meta=metadata)  # pyright: ignore[reportArgumentType]
        return "\n".join(block.text for block in result.content if block.type == "text")  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]


async def test_mcp_toolset_calls_carry_the_key_and_follow_the_annotations(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    replies = [
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1"),
                ToolCallPart("set_value", {"key": "a", "value": "1"}, tool_call_id="c2"),
                ToolCallPart("send_email", {"to": "ann"}, tool_call_id="c3"),
            ]
        ),
        ModelResponse(parts=[TextPart("Done.")]),
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return replies.pop(0)

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "dex_agents.testing.mcp_server", "--log", str(calls)]
    )
    agent = Agent(FunctionModel(model), toolsets=[StdioMcpToolset(server)])
    session = Session(PydanticAIRunner(agent))
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [call.policy for call in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.READ, False),  # readOnlyHint
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),  # idempotentHint
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),  # no hints: the default
    ]
    await session.run_tools()
    assert [record.output for record in session.records] == [
        "order 7: shipped",
        "a = 1",
        "sent to ann",
    ]
    turn = session.records[0].turn_id
    assert [(c["tool"], c["idempotency_key"]) for c in read_calls(calls)] == [
        ("lookup", f"{session.flow_id}/{turn}/c1"),
        ("set_value", f"{session.flow_id}/{turn}/c2"),
        ("send_email", f"{session.flow_id}/{turn}/c3"),
    ]


async def test_mcp_toolset_calls_carry_the_traceparent_of_the_current_span(
    tmp_path: Path,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    calls = tmp_path / "calls.jsonl"
    replies = [
        ModelResponse(parts=[ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("Done.")]),
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return replies.pop(0)

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "dex_agents.testing.mcp_server", "--log", str(calls)]
    )
    session = Session(
        PydanticAIRunner(Agent(FunctionModel(model), toolsets=[StdioMcpToolset(server)]))
    )
    session.start_turn("go")
    await session.run_model()
    # The session runs each tool Step inside its execute_tool span; stand in for it.
    with TracerProvider().get_tracer("test").start_as_current_span("execute_tool") as span:
        await session.run_tools()
        context = span.get_span_context()
    (call,) = read_calls(calls)
    flags = int(context.trace_flags)
    assert call["traceparent"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    assert call["idempotency_key"] == f"{session.flow_id}/{session.records[0].turn_id}/c1"
