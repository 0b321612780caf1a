"""``McpToolSource`` against real MCP servers written with the ``mcp`` SDK."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from dex_agents import ToolEffect, ToolPolicy
from dex_agents.mcp import (
    McpHttpServer,
    McpStdioServer,
    McpToolCallInterruptedError,
    McpToolSource,
    load_mcp_server_configs,
    mcp_tool_name,
)
from dex_agents.runner import ToolExecutionError
from dex_agents.testing import RecordingEventWriter, poll_until
from dex_agents.testing.mcp_server import McpHttpTestServer, read_calls


def test_names_are_sanitized_and_long_names_shortened_with_a_hash() -> None:
    assert mcp_tool_name("files", "read.file v2") == "files__read_file_v2"
    long_a = mcp_tool_name("files", "a" * 80)
    long_b = mcp_tool_name("files", "a" * 79 + "b")
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b
    assert long_a.startswith("files__aaaa")


def test_server_configs_are_validated() -> None:
    with pytest.raises(ValueError, match="must be letters"):
        McpStdioServer(name="bad name", command="x")
    with pytest.raises(ValueError, match="url"):
        McpHttpServer(name="web", url="ftp://example.com")
    with pytest.raises(ValueError, match="two servers with one name"):
        McpToolSource(
            [McpStdioServer(name="a", command="x"), McpStdioServer(name="a", command="y")]
        )


def test_config_files_load_and_bad_ones_name_the_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {
                "servers": [
                    {"transport": "stdio", "name": "files", "command": "srv", "args": ["/tmp"]},
                    {
                        "transport": "streamable_http",
                        "name": "web",
                        "url": "http://127.0.0.1:1/mcp",
                        "trusts_tool_annotations": False,
                    },
                ]
            }
        )
    )
    files, web = load_mcp_server_configs(good)
    assert isinstance(files, McpStdioServer)
    assert files.args == ("/tmp",)
    assert isinstance(web, McpHttpServer)
    assert not web.trusts_tool_annotations
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"servers": [{"transport": "smoke", "name": "x"}]}))
    with pytest.raises(ValueError, match="invalid MCP server configuration"):
        load_mcp_server_configs(bad)
    with pytest.raises(ValueError, match="cannot read"):
        load_mcp_server_configs(tmp_path / "missing.json")


async def test_tools_of_stdio_and_http_servers_with_effects_and_policies(
    stdio_server: McpStdioServer, http_server: McpHttpServer
) -> None:
    untrusted = http_server.model_copy(update={"trusts_tool_annotations": False})
    source = McpToolSource([stdio_server, untrusted], resource_and_prompt_tools_enabled=True)
    tools = {tool.name: tool for tool in await source.list_tools()}
    assert list(tools)[:2] == ["files__lookup", "files__set_value"]
    assert tools["files__lookup"].effect is ToolEffect.READ
    assert tools["files__set_value"].effect is ToolEffect.IDEMPOTENT_WRITE
    assert tools["files__send_email"].effect is None
    assert tools["tickets__lookup"].effect is None  # the server is not trusted
    assert list(tools)[-3:] == [
        "mcp_list_resources_and_prompts",
        "mcp_read_resource",
        "mcp_get_prompt",
    ]
    assert tools["mcp_read_resource"].parameters["properties"]["server"]["enum"] == [
        "files",
        "tickets",
    ]
    policies = await source.tool_policies()
    assert policies["files__lookup"] == ToolPolicy(ToolEffect.READ)
    assert "files__send_email" not in policies
    assert "tickets__set_value" not in policies


async def test_every_call_carries_the_idempotency_key(
    stdio_server: McpStdioServer, http_server: McpHttpServer, calls: Path
) -> None:
    source = McpToolSource([stdio_server, http_server])
    assert await source.call_tool("files__lookup", {"order_id": "7"}, idempotency_key="f/t/1") == (
        "order 7: shipped"
    )
    assert (
        await source.call_tool("tickets__send_email", '{"to": "ann"}', idempotency_key="f/t/2")
        == "sent to ann"
    )
    assert [(call["tool"], call["idempotency_key"]) for call in read_calls(calls)] == [
        ("lookup", "f/t/1"),
        ("send_email", "f/t/2"),
    ]


async def test_an_error_result_and_unknown_servers_are_tool_execution_errors(
    http_server: McpHttpServer,
) -> None:
    source = McpToolSource([http_server], resource_and_prompt_tools_enabled=True)
    with pytest.raises(ToolExecutionError, match="explode"):
        await source.call_tool("tickets__explode", {}, idempotency_key="k")
    with pytest.raises(ToolExecutionError, match="no configured MCP server offers"):
        await source.call_tool("nowhere__tool", {}, idempotency_key="k")
    with pytest.raises(ToolExecutionError, match="no MCP server named"):
        await source.call_tool(
            "mcp_read_resource", {"server": "x", "uri": "note://a"}, idempotency_key=None
        )


async def test_a_down_server_is_left_out_and_backed_off(
    stdio_server: McpStdioServer, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    down = McpStdioServer(name="down", command=sys.executable, args=("-c", "raise SystemExit(3)"))
    source = McpToolSource(
        [down, stdio_server],
        connection_attempts=1,
        clock=lambda: now[0],
        resource_and_prompt_tools_enabled=True,
    )
    with caplog.at_level(logging.WARNING):
        names = [tool.name for tool in await source.list_tools()]
    assert names
    assert all(not name.startswith("down__") for name in names)
    assert "MCP server 'down' offers no tools" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await source.list_tools()  # within the backoff: not tried again
    assert "down" not in caplog.text
    with pytest.raises(ToolExecutionError, match="cannot connect to MCP server down after 1"):
        await source.call_tool(
            "mcp_list_resources_and_prompts", {"server": "down"}, idempotency_key=None
        )


async def test_the_listing_is_cached_and_refreshed_in_the_background(
    tmp_path: Path, calls: Path, release: Path
) -> None:
    now = [0.0]
    with McpHttpTestServer(
        calls=calls, release=release, stateful=False, process_log=tmp_path / "a.log"
    ) as first:
        source = McpToolSource(
            [McpHttpServer(name="t", url=first.url)], clock=lambda: now[0], connection_attempts=1
        )
        assert len(await source.list_tools()) == 8
    # Down now, but the cached tools are still offered within the TTL.
    assert len(await source.list_tools()) == 8
    now[0] = 301.0
    assert len(await source.list_tools()) == 8  # stale: refreshed in the background
    assert len(await source.list_tools(refresh=True)) == 0


async def test_a_server_restart_between_listing_and_calling_is_harmless(
    tmp_path: Path, calls: Path, release: Path
) -> None:
    server = McpHttpTestServer(
        calls=calls, release=release, stateful=True, process_log=tmp_path / "http.log"
    )
    with server:
        source = McpToolSource([McpHttpServer(name="t", url=server.url)])
        await source.list_tools()
    with server:
        assert (
            await source.call_tool("t__set_value", {"key": "a", "value": "1"}, idempotency_key="k")
            == "a = 1"
        )


async def test_progress_becomes_events(stdio_server: McpStdioServer) -> None:
    events = RecordingEventWriter()
    source = McpToolSource([stdio_server])
    output = await source.call_tool(
        "files__count_up", {"to": 3}, idempotency_key="k", events=events
    )
    assert output == "counted to 3"
    progress = [payload for kind, payload in events.other if kind == "mcp.tool_progress"]
    assert [payload["progress"] for payload in progress] == [1, 2, 3]  # pyright: ignore[reportIndexIssue]


async def test_resource_and_prompt_tools_answer_sorted_json(stdio_server: McpStdioServer) -> None:
    source = McpToolSource([stdio_server], resource_and_prompt_tools_enabled=True)
    listed = await source.call_tool(
        "mcp_list_resources_and_prompts", {"server": "files"}, idempotency_key=None
    )
    assert listed.startswith('{"prompts": [{"arguments": [{"name": "name", "required": true}]')
    assert json.loads(listed)["resources"][0]["uri"] == "note://readme"
    assert json.loads(listed)["resource_templates"][0]["uriTemplate"] == "note://{name}"
    read = await source.call_tool(
        "mcp_read_resource", {"server": "files", "uri": "note://readme"}, idempotency_key=None
    )
    assert json.loads(read)["contents"][0]["text"] == "Read me first."
    prompt = await source.call_tool(
        "mcp_get_prompt",
        {"server": "files", "name": "greeting", "arguments": {"name": "Ann"}},
        idempotency_key=None,
    )
    assert json.loads(prompt)["messages"][0]["content"]["text"] == "Say hello to Ann."
    with pytest.raises(ToolExecutionError):
        await source.call_tool(
            "mcp_get_prompt", {"server": "files", "name": "missing"}, idempotency_key=None
        )


async def test_a_call_cut_off_after_it_was_sent_is_interrupted_not_failed(
    tmp_path: Path, calls: Path, release: Path
) -> None:
    server = McpHttpTestServer(
        calls=calls, release=release, stateful=False, process_log=tmp_path / "http.log"
    )
    with server:
        source = McpToolSource([McpHttpServer(name="t", url=server.url)], connection_attempts=1)
        await source.list_tools()
        call = asyncio.ensure_future(
            source.call_tool("t__hold", {"label": "x"}, idempotency_key="k")
        )
        await poll_until(
            lambda: read_calls(calls) or None, description="the call reaching the server"
        )
    # The server is gone mid-call: the write may have happened, so it is not a tool failure.
    with pytest.raises(McpToolCallInterruptedError, match="was sent and broke off"):
        await call


async def test_the_tool_steps_cancellation_aborts_the_request(
    stdio_server: McpStdioServer, calls: Path
) -> None:
    cancelled = False

    class Signal:
        def is_cancelled(self) -> bool:
            return cancelled

    source = McpToolSource([stdio_server])
    call = asyncio.ensure_future(
        source.call_tool("files__hold", {"label": "x"}, idempotency_key="k", cancellation=Signal())
    )
    await poll_until(lambda: read_calls(calls) or None, description="the call reaching the server")
    cancelled = True
    with pytest.raises(McpToolCallInterruptedError, match="cancelled"):
        await call
