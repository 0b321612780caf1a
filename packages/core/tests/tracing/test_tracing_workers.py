"""One turn with parallel tools across two Worker processes exports one connected trace."""

from __future__ import annotations

import json
import os
from pathlib import Path

from traced_worker_flows import traced_parallel_flow
from ui_support import new_session_id

from dex_agents import AgentHost
from dex_agents.testing import KillableWorkerProcess

HERE = Path(__file__).parent


async def test_parallel_tools_in_two_workers_form_one_trace(engine, tmp_path: Path) -> None:
    spans_file = tmp_path / "spans.jsonl"
    environment = {
        "TRACE_SPANS_FILE": str(spans_file),
        "TRACE_GATES": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(
            [str(HERE), str(HERE.parent / "ui_stream"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    workers = [
        KillableWorkerProcess.start(
            server_address=engine.address,
            log_path=tmp_path / f"worker-{index}.log",
            entry_module="traced_worker_main",
            arguments=["traced_worker_flows:traced_parallel_flow"],
            environment=environment,
        )
        for index in range(2)
    ]
    try:
        sid = new_session_id()
        async with AgentHost(
            traced_parallel_flow(), server_address=engine.address, worker=False
        ) as host:
            sessions = host.client()
            await sessions.start_session(sid, "run both")
            snapshot = await sessions.wait_for_turn(sid)
        assert snapshot.messages[-1].text is not None
        assert snapshot.messages[-1].text.startswith("both done")
    finally:
        for worker in workers:
            worker.stop()

    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    (root,) = by_name["invoke_agent Parallel"]
    chats = by_name["chat scripted-1"]
    tools = by_name["execute_tool first"] + by_name["execute_tool second"]
    assert len(chats) == 2
    assert len(tools) == 2
    assert {span["trace_id"] for span in spans} == {root["trace_id"]}  # one connected trace
    assert root["parent_id"] is None
    assert all(span["parent_id"] == root["span_id"] for span in chats + tools)
    assert len({span["pid"] for span in tools}) == 2  # the tools ran in two Workers
    assert {span["kind"] for span in chats} == {"CLIENT"}
    first_chat = chats[0]["attributes"]
    assert first_chat["gen_ai.operation.name"] == "chat"
    assert first_chat["gen_ai.request.model"] == "scripted-1"
    assert first_chat["gen_ai.provider.name"] == "scripted"
    assert first_chat["gen_ai.usage.input_tokens"] == 7
    assert first_chat["dex.agent.requested_tool_call.ids"] == ["first", "second"]
    for tool in tools:
        attributes = tool["attributes"]
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.call.id"] == attributes["gen_ai.tool.name"]
        assert attributes["dex.step.type"] == "CallTool"
        assert attributes["gen_ai.conversation.id"] == sid
