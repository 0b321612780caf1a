"""A Stepwise agent on server-everything over Streamable HTTP and the test server over stdio.

The user message names the call: ``call <tool> <JSON arguments>``; any other message is
echoed. The servers come from environment variables, so the test and its Worker
children build the same Flow: ``everything`` at ``DEX_TEST_MCP_EVERYTHING_URL``, and
``files`` (the test server, logging to ``DEX_TEST_MCP_CALLS``) whose ``hold`` call is an
idempotent write here, so a retry after a Worker SIGKILL sends it again.
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

FLOW_TYPE = "McpReferenceAgent"
URL_VARIABLE = "DEX_TEST_MCP_EVERYTHING_URL"
CALLS_VARIABLE = "DEX_TEST_MCP_CALLS"
RELEASE_VARIABLE = "DEX_TEST_MCP_RELEASE"

POLICIES = {
    # No annotations on either; these make them writes that run without approval.
    "everything__simulate-research-query": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    "files__hold": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
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


def build_source(url: str, calls: str, release: str) -> McpToolSource:
    files = McpStdioServer(
        name="files",
        command=sys.executable,
        args=("-m", "dex_agents.testing.mcp_server", "--log", calls, "--release", release),
    )
    return McpToolSource(
        [McpHttpServer(name="everything", url=url), files],
        # A loaded test machine can take seconds to start a server's runtime.
        listing_timeout_seconds=60,
        task_poll_max_interval_seconds=2,
    )


def build_flow(source: McpToolSource, flow_type: str = FLOW_TYPE) -> Any:
    definition = AgentDefinition(
        name="mcp-reference",
        instructions="Use the MCP tools.",
        model=ScriptedModelClient(_reply),
        tool_sources=[source],
        tool_policies=POLICIES,
        tool_source_listing_timeout=timedelta(minutes=2),
    )
    return create_stepwise_session_flow(definition, flow_type)


def build_flows() -> list[Any]:
    source = build_source(
        os.environ[URL_VARIABLE], os.environ[CALLS_VARIABLE], os.environ[RELEASE_VARIABLE]
    )
    return [build_flow(source)]
