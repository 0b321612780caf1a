"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension) through a Stepwise agent on
the real engine, against the real test servers.

The HTTP server keeps its tasks in a store every connection reads, so its tasks become
tool tasks polled by ``PollToolTask``; a stdio server's task ends with its process, so
the tool Step polls it on its own connection. The "long" task finishes when the test
writes the release file, and the agent's source polls at least every 2 seconds. The last
test drives ``McpToolSource`` as the tool Step and ``PollToolTask`` would, to show that a
retried attempt resumes the saved task and that a lost task fails the poll.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentToolCall, AgentToolCallStatus, ToolEffect
from dex_agents.mcp import McpHttpServer, McpStdioServer, McpTaskPollError, McpToolSource
from dex_agents.runner import (
    DeferredToolExecution,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskStarted,
)
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    RecordingEventWriter,
    executed_step_types,
    poll_until,
    read_step_history,
)
from dex_agents.testing.mcp_server import McpHttpTestServer, read_calls


def _flow(mcp_agent: Any, calls: Path, release: Path, url: str, flow_type: str) -> Any:
    source: McpToolSource = mcp_agent.build_source(str(calls), str(release), url)
    return mcp_agent.build_flow(source, flow_type)


def _statuses(events: list[Any]) -> list[str]:
    return [json.loads(e.payload)["status"] for e in events if e.type == "mcp.task_status"]


def _waiting(snapshot: Any) -> bool:
    return any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in snapshot.tool_calls)


def _calls_of(calls: Path, tool: str) -> list[dict[str, Any]]:
    return [c for c in read_calls(calls) if c["tool"] == tool]


@pytest.mark.slow
async def test_http_task_completes_across_a_worker_sigkill_without_holding_a_slot(
    mcp_agent: Any,
    calls: Path,
    release: Path,
    http_process: McpHttpTestServer,
    worker_environment: dict[str, str],
    tmp_path: Path,
) -> None:
    flow = _flow(mcp_agent, calls, release, http_process.url, mcp_agent.FLOW_TYPE)
    waiting = f"mcp-task-{uuid.uuid4().hex[:8]}"
    other = f"mcp-chat-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow]) as env:
        sessions = AgentSessionTestClient(env.client, flow)

        def start_worker(name: str) -> Any:
            # One Step slot: a Worker that held it for the task could run nothing else.
            return env.start_worker_process(
                log_path=tmp_path / f"{name}.log",
                arguments=[],
                entry_module="mcp_task_worker",
                environment=worker_environment,
            )

        first = start_worker("first")
        await sessions.start_session(waiting, 'call tickets__build_report {"label": "q1"}')
        snapshot = await sessions.wait_for_snapshot(
            waiting, _waiting, description="the MCP task is started"
        )
        record = snapshot.tool_calls[0]
        assert record.task_id is not None
        assert record.task_poll_interval_seconds == 1  # the server's pollIntervalMs, 1000
        first.kill()

        start_worker("second")
        await sessions.start_session(other, "hello")
        chat = await sessions.wait_for_completed_turns(other, 1)
        assert chat.messages[-1].text == "echo: hello"
        still = await sessions.snapshot(waiting)
        assert still.tool_calls[0].status is AgentToolCallStatus.WAITING_FOR_TASK

        release.write_text("go")  # noqa: ASYNC240
        done = await sessions.wait_for_completed_turns(waiting, 1)
        events = await sessions.read_events_through_turn(waiting, "turn-1")
        history = await read_step_history(env.server_address, waiting)

    assert done.messages[-1].text == "tickets__build_report: report q1 ready"
    finished = [json.loads(e.payload) for e in events if e.type == "tool_call_finished"]
    assert [f["status"] for f in finished] == ["succeeded"]
    # tools/call reached the server once; every later request only read the task.
    (started,) = _calls_of(calls, "build_report")
    assert started["idempotency_key"] == f"{waiting}/turn-1/{record.tool_call_id}"
    steps = executed_step_types(history)
    assert steps.count("CallTool") == 1
    assert steps.count("PollToolTask") >= 1
    assert _statuses(events)[0] == "working"
    assert _statuses(events)[-1] == "completed"


async def test_http_task_input_request_becomes_a_question_and_the_answer_reaches_the_server(
    mcp_agent: Any, calls: Path, release: Path, http_process: McpHttpTestServer
) -> None:
    flow = _flow(mcp_agent, calls, release, http_process.url, "McpTaskQuestion")
    sid = f"mcp-ask-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call tickets__approve_report {"label": "q2"}')
        (question,) = await sessions.wait_for_pending_interrupts(sid, 1)
        record = (await sessions.snapshot(sid)).tool_calls[0]
        assert not await sessions.answer_question(sid, question.interrupt_id, "maybe")
        assert await sessions.answer_question(sid, question.interrupt_id, "approve")
        done = await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")

    assert question.question == "Approve report q2?"
    assert question.choices == ("approve", "reject")
    assert question.interrupt_id == f"{record.tool_call_id}-input-1"
    assert record.task_id is not None
    assert done.messages[-1].text == "tickets__approve_report: report q2: approve"
    updates = _calls_of(calls, "tasks/update")
    assert updates
    assert {u["task_id"] for u in updates} == {record.task_id}
    assert updates[0]["responses"] == {
        "approval": {"action": "accept", "content": {"decision": "approve"}}
    }
    assert len(_calls_of(calls, "approve_report")) == 1
    assert "input_required" in _statuses(events)
    assert _statuses(events)[-1] == "completed"


async def test_stdio_task_is_polled_inside_the_tool_step(
    mcp_agent: Any, calls: Path, release: Path, http_process: McpHttpTestServer
) -> None:
    flow = _flow(mcp_agent, calls, release, http_process.url, "McpTaskInStep")
    sid = f"mcp-stdio-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call files__build_report {"label": "q3"}')
        await poll_until(
            lambda: bool(_calls_of(calls, "build_report")),
            description="the task's tools/call reaching the stdio server",
        )
        running = await sessions.wait_for_snapshot(
            sid, lambda s: bool(s.tool_calls), description="the call's record"
        )
        release.write_text("go")  # noqa: ASYNC240
        done = await sessions.wait_for_completed_turns(sid, 1)
        events = await sessions.read_events_through_turn(sid, "turn-1")
        history = await read_step_history(env.server_address, sid)

    # The task never left the tool Step: no task ID on the record, no PollToolTask.
    (record,) = running.tool_calls
    assert record.task_id is None
    assert record.status is not AgentToolCallStatus.WAITING_FOR_TASK
    assert done.messages[-1].text == "files__build_report: report q3 ready"
    assert "PollToolTask" not in executed_step_types(history)
    assert _statuses(events) == ["working", "completed"]
    assert len(_calls_of(calls, "build_report")) == 1


async def test_cancel_turn_during_a_task_sends_tasks_cancel(
    mcp_agent: Any, calls: Path, release: Path, http_process: McpHttpTestServer
) -> None:
    flow = _flow(mcp_agent, calls, release, http_process.url, "McpTaskCancel")
    sid = f"mcp-cancel-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow], worker_in_process=True) as env:
        sessions = AgentSessionTestClient(env.client, flow)
        await sessions.start_session(sid, 'call tickets__build_report {"label": "q4"}')
        snapshot = await sessions.wait_for_snapshot(
            sid, _waiting, description="the MCP task is started"
        )
        assert await sessions.cancel_turn(sid)
        events = await sessions.read_events_through_turn(sid, "turn-1")

    task_id = snapshot.tool_calls[0].task_id
    finished = [json.loads(e.payload) for e in events if e.type == "tool_call_finished"]
    assert [f["status"] for f in finished] == ["outcome_unknown"]
    assert events[-1].type == "turn_cancelled"
    assert [c["task_id"] for c in _calls_of(calls, "tasks/cancel")] == [task_id]


async def test_tools_whose_names_collide_keep_the_first_with_a_warning(
    calls: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = McpStdioServer(
        name="files",
        command=sys.executable,
        args=("-m", "dex_agents.testing.mcp_server", "--log", str(calls), "--colliding-tools"),
    )
    source = McpToolSource([server])
    with caplog.at_level(logging.WARNING, logger="dex_agents.mcp"):
        tools = await source.list_tools()

    (kept,) = [tool for tool in tools if tool.name == "files__report_status"]
    assert kept.mcp_name == "report.status"
    assert kept.description == "The first of two tools with one sanitized name."
    assert "MCP tool 'report_status' of server 'files' is left out" in caplog.text
    assert await source.call_tool("files__report_status", {}, idempotency_key=None) == "dotted"


class _NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _no_heartbeat() -> None:
    return None


def _task_call(record: AgentToolCall, checkpoint: str | None, saved: list[str]) -> Any:
    async def save(text: str) -> None:
        saved.append(text)

    return DeferredToolExecution(
        flow_id="s-1",
        tool_call=record,
        idempotency_key="s-1/turn-1/c1",
        attempt=2 if checkpoint else 1,
        events=RecordingEventWriter(),
        cancellation=_NotCancelled(),
        deadline=datetime.now(UTC) + timedelta(minutes=5),
        heartbeat=_no_heartbeat,
        heartbeat_checkpoint=checkpoint,
        save_heartbeat_checkpoint=save,
        supports_tool_tasks=True,
    )


def _poll(record: AgentToolCall, events: RecordingEventWriter) -> ToolTaskPoll:
    return ToolTaskPoll(
        flow_id="s-1",
        tool_call=record,
        idempotency_key="s-1/turn-1/c1",
        attempt=1,
        events=events,
        cancellation=_NotCancelled(),
        deadline=datetime.now(UTC) + timedelta(minutes=5),
    )


async def test_a_retried_attempt_resumes_the_saved_task_and_polls_read_it(
    http_server: McpHttpServer, calls: Path, release: Path
) -> None:
    source = McpToolSource([http_server])
    record = AgentToolCall(
        tool_call_id="c1",
        turn_id="turn-1",
        tool_name="tickets__build_report",
        arguments='{"label": "r"}',
        effect=ToolEffect.IDEMPOTENT_WRITE,
        requires_approval=False,
        status=AgentToolCallStatus.APPROVED,
        deferral_order=0,
        tool_source_reference='{"server":"tickets","task_support":"forbidden","tool":"build_report"}',
    )
    saved: list[str] = []
    started = await source.execute_deferred_tool_call(_task_call(record, None, saved))
    assert isinstance(started, ToolTaskStarted)
    assert saved == [started.task_id]  # the checkpoint, before the Step returned
    # A retried attempt with the checkpoint resumes the task: tools/call is not sent again.
    again = await source.execute_deferred_tool_call(_task_call(record, started.task_id, saved))
    assert isinstance(again, ToolTaskStarted)
    assert again.task_id == started.task_id
    assert len(_calls_of(calls, "build_report")) == 1

    waiting = replace(
        record,
        status=AgentToolCallStatus.WAITING_FOR_TASK,
        task_id=started.task_id,
        task_poll_interval_seconds=1,
    )
    events = RecordingEventWriter()
    pending = await source.poll_tool_task(_poll(waiting, events))
    assert isinstance(pending, ToolTaskPending)
    assert pending.poll_interval_seconds == 2  # double the previous, above the server's 1 s
    release.write_text("go")  # noqa: ASYNC240
    polled = replace(waiting, input_continuation=pending.continuation)
    done = await poll_until_done(source, polled, events)
    assert done == ToolExecutionResult("report r ready")
    statuses = [p["status"] for t, p in events.other if t == "mcp.task_status"]  # type: ignore[index]
    assert statuses == ["working", "completed"]

    lost = replace(waiting, task_id="no-such-task")
    with pytest.raises(McpTaskPollError, match="no-such-task"):
        await source.poll_tool_task(_poll(lost, events))


async def poll_until_done(
    source: McpToolSource, record: AgentToolCall, events: RecordingEventWriter
) -> Any:
    """Poll as ``PollToolTask`` would, without waiting out the intervals."""
    while True:
        outcome = await source.poll_tool_task(_poll(record, events))
        if not isinstance(outcome, ToolTaskPending):
            return outcome
        record = replace(record, input_continuation=outcome.continuation)
        await asyncio.sleep(0.05)
