"""MCP tasks on a server that speaks only protocol 2025-11-25 (its experimental tasks).

The server (``dex_agents.testing._mcp_server_2025``) advertises the ``tasks`` capability
and lists both tools with ``execution.taskSupport: "required"``, so the source sends a
task-augmented ``tools/call``; ``PollToolTask`` reads the task with ``tasks/get`` and its
result with ``tasks/result``, during which the server also asks for input. A Stepwise
agent on the real engine, the server as a real child process over Streamable HTTP.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentToolCallStatus
from dex_agents.mcp import McpHttpServer, McpToolSource
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)
from dex_agents.testing._mcp_server_2025 import McpLegacyTaskTestServer
from dex_agents.testing.mcp_server import read_calls


@pytest.fixture
def legacy_process(calls: Path, release: Path, tmp_path: Path) -> Iterator[McpLegacyTaskTestServer]:
    with McpLegacyTaskTestServer(
        calls=calls, release=release, process_log=tmp_path / "legacy.log"
    ) as process:
        yield process


def _flow(mcp_agent: Any, url: str, flow_type: str) -> Any:
    # The test's clock: a task is polled at least every 2 seconds.
    source = McpToolSource(
        [McpHttpServer(name="legacy", url=url)], task_poll_max_interval_seconds=2
    )
    return mcp_agent.build_flow(source, flow_type)


def _waiting(snapshot: Any) -> bool:
    return any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in snapshot.tool_calls)


def _calls_of(calls: Path, tool: str) -> list[dict[str, Any]]:
    return [c for c in read_calls(calls) if c["tool"] == tool]


def _statuses(events: list[Any]) -> list[str]:
    return [json.loads(e.payload)["status"] for e in events if e.type == "mcp.task_status"]


async def test_a_2025_11_25_task_completes_through_polling_and_is_called_once(
    mcp_agent: Any, calls: Path, release: Path, legacy_process: McpLegacyTaskTestServer
) -> None:
    flow = _flow(mcp_agent, legacy_process.url, "McpLegacyTask")
    sid = f"mcp-legacy-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call legacy__slow_report {"label": "l1"}')
        snapshot = await sessions.wait_for_snapshot(
            sid, _waiting, description="the 2025-11-25 task is started"
        )
        record = snapshot.tool_calls[0]
        release.write_text("go")  # noqa: ASYNC240
        done = await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")
        history = await read_step_history(env.server_address, sid)

    assert record.task_id is not None
    assert record.task_poll_interval_seconds == 1  # the server's pollInterval, 1000 ms
    assert done.messages[-1].text == "legacy__slow_report: report l1 ready"
    (started,) = _calls_of(calls, "slow_report")
    assert started["idempotency_key"] == f"{sid}/turn-1/{record.tool_call_id}"
    steps = executed_step_types(history)
    assert steps.count("CallTool") == 1
    assert steps.count("PollToolTask") >= 1
    assert _statuses(events)[0] == "working"
    assert _statuses(events)[-1] == "completed"


async def test_a_2025_11_25_input_request_becomes_a_question_and_the_answer_reaches_the_server(
    mcp_agent: Any, calls: Path, legacy_process: McpLegacyTaskTestServer
) -> None:
    flow = _flow(mcp_agent, legacy_process.url, "McpLegacyQuestion")
    sid = f"mcp-legacy-ask-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call legacy__ask_approval {"label": "l2"}')
        (question,) = await sessions.wait_for_pending_interrupts(sid, 1)
        record = (await sessions.snapshot(sid)).tool_calls[0]
        assert await sessions.answer_question(sid, question.interrupt_id, "reject")
        done = await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")

    assert question.question == "Approve report l2?"
    assert question.choices == ("approve", "reject")
    assert done.messages[-1].text == "legacy__ask_approval: report l2: reject"
    # Asks the source left open were never answered; the one answer is the user's.
    answers = [
        c["response"] for c in _calls_of(calls, "elicitation") if c["task_id"] == record.task_id
    ]
    assert answers == [{"action": "accept", "content": {"decision": "reject"}}]
    assert len(_calls_of(calls, "ask_approval")) == 1
    assert "input_required" in _statuses(events)
    assert _statuses(events)[-1] == "completed"


async def test_cancel_turn_during_a_2025_11_25_task_sends_tasks_cancel(
    mcp_agent: Any, calls: Path, legacy_process: McpLegacyTaskTestServer
) -> None:
    flow = _flow(mcp_agent, legacy_process.url, "McpLegacyCancel")
    sid = f"mcp-legacy-cancel-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call legacy__slow_report {"label": "l3"}')
        snapshot = await sessions.wait_for_snapshot(
            sid, _waiting, description="the 2025-11-25 task is started"
        )
        assert await sessions.cancel_turn(sid)
        events = await sessions.read_events_through_turn(sid, "turn-1")

    task_id = snapshot.tool_calls[0].task_id
    finished = [json.loads(e.payload) for e in events if e.type == "tool_call_finished"]
    assert [f["status"] for f in finished] == ["outcome_unknown"]
    assert [c["task_id"] for c in _calls_of(calls, "tasks/cancel")] == [task_id]
