"""``McpToolSource`` against the official MCP reference servers, nobody here wrote.

``@modelcontextprotocol/server-everything`` (stdio and Streamable HTTP, where it keeps
one MCP session per client and its tasks in that session), ``server-memory`` and
``server-filesystem`` from npm (pinned in ``reference_servers/package-lock.json``,
installed with ``npm ci``), ``mcp-server-time`` from PyPI, and servers that misbehave:
one that never answers and one that prints garbage, over stdio and HTTP.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.mcp import McpToolSource
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.runner import ToolExecutionError, ToolTaskPoll
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    RecordingEventWriter,
    executed_step_types,
    poll_until,
    read_step_history,
)
from dex_agents.testing.mcp_reference import (
    EverythingHttpServer,
    GarbageHttpServer,
    HungHttpServer,
    ReferenceServers,
    garbage_stdio_server,
    hung_stdio_server,
    time_server,
)

RESEARCH = "everything__simulate-research-query"


def _finished(events: Any) -> list[str]:
    return [json.loads(e.payload)["status"] for e in events if e.type == "tool_call_finished"]


def _servers_of(tools: Any) -> set[str]:
    return {tool.server for tool in tools if tool.server}


async def test_every_reference_server_lists_and_answers_over_stdio_and_http(
    reference: ReferenceServers, everything_http: EverythingHttpServer, tmp_path: Path
) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "notes.txt").write_text("tides are tidal")
    source = McpToolSource(
        [
            reference.everything(),
            reference.memory(tmp_path / "memory.jsonl"),
            reference.filesystem(tmp_path / "root"),
            time_server(),
            everything_http.config("web"),
        ],
        resource_and_prompt_tools_enabled=True,
        listing_timeout_seconds=60,
    )
    try:
        tools = {tool.name: tool for tool in await source.list_tools()}
        events = RecordingEventWriter()
        echo = await source.call_tool(
            "everything__echo", {"message": "hi"}, idempotency_key="s/t/1"
        )
        web_echo = await source.call_tool("web__echo", {"message": "hi"}, idempotency_key="s/t/2")
        read = await source.call_tool(
            "files__read_text_file",
            {"path": str(tmp_path / "root" / "notes.txt")},
            idempotency_key="s/t/3",
        )
        created = await source.call_tool(
            "memory__create_entities",
            {"entities": [{"name": "ann", "entityType": "person", "observations": ["likes tea"]}]},
            idempotency_key="s/t/4",
        )
        graph = json.loads(await source.call_tool("memory__read_graph", {}, idempotency_key=None))
        now = json.loads(
            await source.call_tool(
                "time__get_current_time", {"timezone": "UTC"}, idempotency_key=None
            )
        )
        progress = await source.call_tool(
            "web__trigger-long-running-operation",
            {"duration": 1, "steps": 2},
            idempotency_key="s/t/5",
            events=events,
        )
        listed = json.loads(
            await source.call_tool(
                "mcp_list_resources_and_prompts", {"server": "web"}, idempotency_key=None
            )
        )
        prompt = json.loads(
            await source.call_tool(
                "mcp_get_prompt",
                {"server": "everything", "name": "args-prompt", "arguments": {"city": "Oslo"}},
                idempotency_key=None,
            )
        )
        with pytest.raises(ToolExecutionError):
            await source.call_tool(
                "files__read_text_file", {"path": "/etc/passwd"}, idempotency_key="s/t/6"
            )
    finally:
        await source.aclose()

    assert _servers_of(tools.values()) == {"everything", "memory", "files", "time", "web"}
    assert tools["everything__echo"].effect is ToolEffect.READ
    assert tools["files__write_file"].effect is ToolEffect.IDEMPOTENT_WRITE
    assert tools["memory__create_entities"].effect is None  # no hints: the default effect
    assert tools[RESEARCH].task_support == "required"
    assert echo == web_echo == "Echo: hi"
    assert read == "tides are tidal"
    assert "ann" in created
    assert graph["entities"][0]["observations"] == ["likes tea"]
    assert now["timezone"] == "UTC"
    assert "completed" in progress.lower()
    assert [p["progress"] for k, p in events.other if k == "mcp.tool_progress"]  # type: ignore[index]
    assert any(r["uri"].startswith("demo://") for r in listed["resources"])
    assert "Oslo" in json.dumps(prompt["messages"])


async def test_hung_and_garbage_servers_never_hide_the_healthy_ones(
    reference: ReferenceServers, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with HungHttpServer() as hung_http, GarbageHttpServer() as garbage_http:
        source = McpToolSource(
            [
                hung_stdio_server(),
                garbage_stdio_server(),
                hung_http.config("hung_http"),
                garbage_http.config("garbage_http", connection_timeout_seconds=5),
                reference.memory(tmp_path / "memory.jsonl"),
                time_server(),
            ],
            resource_and_prompt_tools_enabled=True,
            # Long enough for a healthy server to start on a loaded machine.
            listing_timeout_seconds=12,
            connection_attempts=1,
        )
        try:
            with caplog.at_level(logging.WARNING, logger="dex_agents.mcp"):
                first = await source.list_tools()
                warned = caplog.text
                caplog.clear()
                again = await source.list_tools()
                garbage_failed = await poll_until(
                    lambda: (
                        "'garbage_http' offers no tools: listing failed" in warned + caplog.text
                    ),
                    description="the garbage HTTP server's listing failing",
                    within=timedelta(seconds=60),
                )
        finally:
            await source.aclose()

    # The healthy servers and the resource tools are offered; the bad ones are named.
    assert {"memory", "time"} <= _servers_of(first)
    assert not _servers_of(first) & {"hung", "garbage", "hung_http", "garbage_http"}
    assert "mcp_read_resource" in {tool.name for tool in first}
    for name in ("hung", "garbage", "hung_http"):
        assert f"MCP server '{name}' offers no tools in this listing" in warned
    # The next listing offers the same without waiting for the bad servers again.
    assert {tool.name for tool in again} == {tool.name for tool in first}
    assert "did not list within" not in caplog.text
    assert garbage_failed


async def test_a_cold_start_of_several_servers_offers_each_once_it_listed(
    reference: ReferenceServers, everything_http: EverythingHttpServer, tmp_path: Path
) -> None:
    (tmp_path / "root").mkdir()
    source = McpToolSource(
        [
            reference.everything(),
            reference.memory(tmp_path / "memory.jsonl"),
            reference.filesystem(tmp_path / "root"),
            time_server(),
            everything_http.config("web"),
        ],
        listing_timeout_seconds=1,
    )
    try:
        first = await source.list_tools()  # whatever listed within its deadline
        everything = await poll_until(
            lambda: _all_listed(source),  # pyright: ignore[reportUnknownLambdaType]
            description="every server listed",
            within=timedelta(seconds=120),
        )
    finally:
        await source.aclose()
    assert _servers_of(first) <= {"everything", "memory", "files", "time", "web"}
    assert everything


async def _all_listed(source: McpToolSource) -> bool:
    servers = _servers_of(await source.list_tools())
    return servers == {"everything", "memory", "files", "time", "web"}


def _offered(request: ModelRequest) -> str:
    return ",".join(sorted({tool.name.split("__")[0] for tool in request.tools}))


def _reply_with_offer(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=f"{results[0].output[:40]}")
    return ScriptedModelReply(
        text=f"offered: {_offered(request)}",
        tool_calls=(ScriptedToolCall("time__get_current_time", {"timezone": "UTC"}),),
    )


async def test_the_first_model_call_offers_the_healthy_servers_while_one_hangs(
    reference: ReferenceServers, tmp_path: Path
) -> None:
    source = McpToolSource(
        [
            # Never answers, and is given longer to connect than the deadline.
            hung_stdio_server().model_copy(update={"connection_timeout_seconds": 120}),
            reference.memory(tmp_path / "memory.jsonl"),
            time_server(),
        ],
        # Long enough for a healthy server to start on a loaded machine.
        listing_timeout_seconds=12,
    )
    definition = AgentDefinition(
        name="mcp-hung",
        instructions="Use the MCP tools.",
        model=ScriptedModelClient(_reply_with_offer),
        tool_sources=[source],
        tool_source_listing_timeout=timedelta(seconds=30),
    )
    flow = create_stepwise_session_flow(definition, f"McpHung{uuid.uuid4().hex[:6]}")
    sid = f"mcp-hung-{uuid.uuid4().hex[:8]}"
    try:
        async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
            sessions = AgentSessionTestClient(env.client, flow)
            await sessions.start_session(sid, "what time is it?")
            snapshot = await sessions.wait_for_completed_turns(sid, 1)
            events = await sessions.read_events_through_turn(sid, "turn-1")
    finally:
        await source.aclose()

    texts = [m.text for m in snapshot.messages if m.role == "assistant" and m.text]
    assert texts[0] == "offered: memory,time"  # the hung server offered nothing, never failed
    assert _finished(events) == ["succeeded"]
    assert '"timezone": "UTC"' in texts[-1]


def _reference_flow(mcp_reference_agent: Any, url: str, calls: Path, release: Path) -> Any:
    source = mcp_reference_agent.build_source(url, str(calls), str(release))
    return source, mcp_reference_agent.build_flow(source, f"McpReference{uuid.uuid4().hex[:6]}")


def _waiting(snapshot: Any) -> bool:
    return any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in snapshot.tool_calls)


async def test_an_http_task_on_server_everything_is_polled_on_its_session_and_completes(
    mcp_reference_agent: Any, everything_http: EverythingHttpServer, calls: Path, release: Path
) -> None:
    source, flow = _reference_flow(mcp_reference_agent, everything_http.url, calls, release)
    sid = f"mcp-everything-{uuid.uuid4().hex[:8]}"
    try:
        async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
            sessions = AgentSessionTestClient(env.client, flow)
            await sessions.start_session(sid, f'call {RESEARCH} {{"topic": "tides"}}')
            started = await sessions.wait_for_snapshot(
                sid, _waiting, description="the research task is started"
            )
            done = await sessions.wait_for_completed_turns(sid, 1)
            events = await sessions.read_events_through_turn(sid, "turn-1")
            history = await read_step_history(env.server_address, sid)
    finally:
        await source.aclose()

    record = started.tool_calls[0]
    assert record.task_id is not None
    assert done.messages[-1].text.startswith(f"{RESEARCH}: # Research Report: tides")
    assert _finished(events) == ["succeeded"]
    steps = executed_step_types(history)
    assert steps.count("CallTool") == 1
    assert steps.count("PollToolTask") >= 1
    # One MCP session served the listings, the call and every poll.
    assert everything_http.sessions_opened() == 1
    statuses = [json.loads(e.payload)["status"] for e in events if e.type == "mcp.task_status"]
    assert statuses[0] == "working"
    assert statuses[-1] == "completed"


async def test_cancel_turn_during_a_task_on_server_everything_cancels_it_on_its_session(
    mcp_reference_agent: Any, everything_http: EverythingHttpServer, calls: Path, release: Path
) -> None:
    source, flow = _reference_flow(mcp_reference_agent, everything_http.url, calls, release)
    sid = f"mcp-everything-cancel-{uuid.uuid4().hex[:8]}"
    try:
        async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
            sessions = AgentSessionTestClient(env.client, flow)
            await sessions.start_session(sid, f'call {RESEARCH} {{"topic": "tides"}}')
            started = await sessions.wait_for_snapshot(
                sid, _waiting, description="the research task is started"
            )
            assert await sessions.cancel_turn(sid)
            events = await sessions.read_events_through_turn(sid, "turn-1")
            record = started.tool_calls[0]
            # The server's own view of the task, read on the same session.
            with pytest.raises(ToolExecutionError, match="cancelled task"):
                await source.poll_tool_task(
                    ToolTaskPoll(
                        flow_id=sid,
                        tool_call=record,
                        idempotency_key="k",
                        attempt=1,
                        events=RecordingEventWriter(),
                        cancellation=_NeverCancelled(),
                        deadline=datetime.now(UTC) + timedelta(minutes=5),
                    )
                )
    finally:
        await source.aclose()

    finished = [json.loads(e.payload) for e in events if e.type == "tool_call_finished"]
    assert [f["status"] for f in finished] == ["outcome_unknown"]
    assert events[-1].type == "turn_cancelled"
    assert everything_http.sessions_opened() == 1


class _NeverCancelled:
    def is_cancelled(self) -> bool:
        return False


async def test_destructive_idempotent_tools_can_require_approval(
    reference: ReferenceServers, tmp_path: Path
) -> None:
    memory = reference.memory(tmp_path / "memory.jsonl")
    default = McpToolSource([memory], listing_timeout_seconds=60)
    strict = McpToolSource(
        [memory.model_copy(update={"destructive_tools_require_approval": True})],
        listing_timeout_seconds=60,
    )
    try:
        policies = await default.tool_policies()
        strict_policies = await strict.tool_policies()
    finally:
        await default.aclose()
        await strict.aclose()
    # delete_entities: destructiveHint and idempotentHint; read_graph: readOnlyHint.
    assert policies["memory__delete_entities"] == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)
    assert strict_policies["memory__delete_entities"] == ToolPolicy(
        ToolEffect.IDEMPOTENT_WRITE, requires_approval=True
    )
    assert strict_policies["memory__read_graph"] == ToolPolicy(ToolEffect.READ)


def _delete_reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=results[0].output)
    return ScriptedModelReply(
        tool_calls=(ScriptedToolCall("memory__delete_entities", {"entityNames": ["ann"]}),)
    )


async def test_a_stepwise_agent_asks_before_a_destructive_tool_when_told_to(
    reference: ReferenceServers, tmp_path: Path
) -> None:
    memory = reference.memory(tmp_path / "memory.jsonl").model_copy(
        update={"destructive_tools_require_approval": True}
    )
    source = McpToolSource([memory], listing_timeout_seconds=60)
    definition = AgentDefinition(
        name="mcp-destructive",
        instructions="Use the MCP tools.",
        model=ScriptedModelClient(_delete_reply),
        tool_sources=[source],
        tool_source_listing_timeout=timedelta(minutes=2),
    )
    flow = create_stepwise_session_flow(definition, f"McpDestructive{uuid.uuid4().hex[:6]}")
    sid = f"mcp-destructive-{uuid.uuid4().hex[:8]}"
    try:
        async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
            sessions = AgentSessionTestClient(env.client, flow)
            await sessions.start_session(sid, "forget ann")
            (approval,) = await sessions.wait_for_pending_interrupts(sid, 1)
            waiting = (await sessions.snapshot(sid)).tool_calls[0]
            assert await sessions.approve(sid, approval.interrupt_id)
            done = await sessions.wait_for_completed_turns(sid, 1)
            events = await sessions.read_events_through_turn(sid, "turn-1")
    finally:
        await source.aclose()

    assert waiting.effect is ToolEffect.IDEMPOTENT_WRITE
    assert waiting.requires_approval
    assert _finished(events) == ["succeeded"]
    assert "deleted" in (done.messages[-1].text or "").lower()
