"""The app with the stdio demo servers of its YAML config behind ``McpToolSource``:
the Portal lists their tools, and a chat turn calls one in a tool Step."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from app_server import RunningApp
from test_routes import API, send, snapshot, texts, tool_outputs, wait_for

from dex_agents.testing import executed_step_types, read_step_history


@pytest.fixture
async def http(mcp_app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=mcp_app.base_url, timeout=30, headers=mcp_app.csrf_headers
    ) as client:
        yield client


async def test_the_portal_lists_the_mcp_servers_tools(http: httpx.AsyncClient) -> None:
    portal = (await http.get(f"{API}/portal")).json()
    assert portal["mcpServers"] == ["google_docs", "search", "slack"]
    tools = {tool["name"]: tool for tool in portal["tools"]}
    assert set(tools) == {
        "google_docs__create_document",
        "google_docs__search_documents",
        "search__web_search",
        "slack__post_message",
        "slack__search_messages",
        # The broker tools: any selected server's resources and prompts.
        "mcp_get_prompt",
        "mcp_list_resources_and_prompts",
        "mcp_read_resource",
    }
    assert tools["search__web_search"]["server"] == "search"
    assert tools["mcp_read_resource"]["server"] is None
    approval = {name for name, tool in tools.items() if tool["requiresApproval"]}
    assert approval == {"slack__post_message", "google_docs__create_document"}


async def test_a_chat_turn_calls_mcp_tools_in_tool_steps(
    http: httpx.AsyncClient, mcp_app: RunningApp
) -> None:
    workflow_id = str(uuid.uuid4())
    body = {
        "workflowId": workflow_id,
        "enabledMcpServers": ["search", "slack"],
        "enabledTools": ["search__web_search", "slack__post_message"],
    }
    assert (await http.post(f"{API}/start", json=body)).status_code == 200

    # A read (readOnlyHint, trusted by the config) runs at once.
    await send(http, workflow_id, '/tool search__web_search {"query":"dex"}')
    value = await wait_for(http, workflow_id, lambda v: len(texts(v, "assistant")) >= 1, "read")
    assert tool_outputs(value)[0].startswith("Demo search results for 'dex'")

    # A write waits for approval, then the stdio server runs it.
    await send(http, workflow_id, '/tool slack__post_message {"channel":"#ops","message":"hi"}')
    value = await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_tool_approval", "approval"
    )
    (interrupt,) = value["pending_interrupts"]
    approve = {"workflowId": workflow_id, "callId": interrupt["interrupt_id"], "approved": True}
    assert (await http.post(f"{API}/tool-approvals", json=approve)).status_code == 200
    value = await wait_for(http, workflow_id, lambda v: len(tool_outputs(v)) >= 2, "write")
    assert tool_outputs(value)[1] == "Demo Slack message posted to #ops: hi"

    # Each call ran in its own tool Step of the Flow's history, the write after its approval.
    history = await read_step_history(mcp_app.host.server_address, workflow_id)
    steps = executed_step_types(history)
    # The read retries (CallTool); the unclassified write gets one attempt only.
    assert steps[2:5] == ["RunModel", "CallTool", "ResumeTurn"]
    assert steps[-4:] == ["AwaitToolApproval", "CallSingleAttemptTool", "ResumeTurn", "RunModel"]
    value = await snapshot(http, workflow_id)
    calls = [m["tool_name"] for m in value["messages"] if m["role"] == "tool"]
    assert calls == ["search__web_search", "slack__post_message"]
