"""A Stepwise agent whose tools come from the test MCP servers (stdio ``files``, HTTP ``tickets``).

The user message names the call: ``call <tool> <JSON arguments>``; any other message is
echoed. Importable by path
from a Worker child (the test puts this directory on PYTHONPATH); the servers come from
environment variables, so the test and its Worker children build the same Flow.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from typing import Any

from dex_agents import ToolEffect, ToolPolicy
from dex_agents.mcp import McpHttpServer, McpStdioServer, McpToolSource
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow

FLOW_TYPE = "McpStepwiseAgent"
CALLS_VARIABLE = "DEX_TEST_MCP_CALLS"
RELEASE_VARIABLE = "DEX_TEST_MCP_RELEASE"
URL_VARIABLE = "DEX_TEST_MCP_URL"

POLICIES = {
    # hold has no annotations; these policies make it each kind of write without approval.
    "files__hold": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
    "tickets__hold": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
}


def _reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=" | ".join(f"{r.tool_name}: {r.output}" for r in results))
    text = ScriptedModelClient.user_texts(request)[-1]
    if not text.startswith("call "):
        return ScriptedModelReply(text=f"echo: {text}")
    _, name, arguments = text.split(" ", 2)
    return ScriptedModelReply(tool_calls=(ScriptedToolCall(name, json.loads(arguments)),))


def build_source(calls: str, release: str, url: str) -> McpToolSource:
    files = McpStdioServer(
        name="files",
        command=sys.executable,
        args=("-m", "dex_agents.testing.mcp_server", "--log", calls, "--release", release),
    )
    return McpToolSource(
        [files, McpHttpServer(name="tickets", url=url)],
        resource_and_prompt_tools_enabled=True,
        # A loaded test machine can take seconds to start the stdio server's Python.
        listing_timeout_seconds=60,
        # The test's clock: a task is polled at least every 2 seconds, not every minute.
        task_poll_max_interval_seconds=2,
    )


def build_flow(source: McpToolSource, flow_type: str = FLOW_TYPE) -> Any:
    definition = AgentDefinition(
        name="mcp",
        instructions="Use the MCP tools.",
        model=ScriptedModelClient(_reply),
        tool_sources=[source],
        tool_policies=POLICIES,
        # A loaded test machine can take seconds to start the stdio server's Python.
        tool_source_listing_timeout=timedelta(minutes=2),
    )
    return create_stepwise_session_flow(definition, flow_type)


def build_flows() -> list[Any]:
    source = build_source(
        os.environ[CALLS_VARIABLE], os.environ[RELEASE_VARIABLE], os.environ[URL_VARIABLE]
    )
    return [build_flow(source)]
