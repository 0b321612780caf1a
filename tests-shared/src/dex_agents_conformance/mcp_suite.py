"""Conformance scenarios of MCP tools through the adapter's MCP wrapping.

Each scenario starts the MCP test server of ``dex_agents.testing.mcp_server`` over
stateless Streamable HTTP (its tasks live in one store that every connection reads) and
asks the factory for its tools (``ScenarioSession.mcp_server_url``). The server logs every
``tools/call``, ``tasks/update`` and ``tasks/cancel`` it received, with the ``_meta`` keys,
so a scenario checks what really reached it. The scenarios need the opt-in ``MCP_TOOLS``
capability.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ToolCallSpec,
    read_stored_attributes,
)
from dex_agents.values import AgentSnapshot, AgentToolCallStatus
from dex_agents_conformance.adapter import Capability
from dex_agents_conformance.checks import assert_turn_succeeded, final_answer, finished_statuses
from dex_agents_conformance.harness import ConformanceHarness, ScenarioRun
from dex_agents_conformance.rules import ContractRule, contract_rule

FIRST_CALL = "call-0-0"
APPROVE = "tickets__approve_report"
BUILD = "tickets__build_report"
LOOKUP = "tickets__lookup"
TRACE_CONTEXT_ATTRIBUTE = "AgentTraceContext"
"""The session's stored W3C trace context (the spec's ``AgentTraceContext``)."""
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


class McpServer:
    """The MCP test server of one scenario and the calls it logged."""

    def __init__(self, url: str, calls: Path) -> None:
        self.url = url
        self._calls = calls

    def calls(self, tool: str) -> list[dict[str, Any]]:
        """What the server logged for ``tool`` (a tool's MCP name or a ``tasks/*`` method)."""
        from dex_agents.testing.mcp_server import read_calls

        return [call for call in read_calls(self._calls) if call["tool"] == tool]


@asynccontextmanager
async def _one_mcp_call(
    harness: ConformanceHarness, tool: str, arguments: dict[str, str], *, tracing: bool = False
) -> AsyncGenerator[tuple[ScenarioRun, McpServer]]:
    """A scenario whose model calls one MCP tool of the test server, then answers with
    the result; the server runs for the whole scenario."""
    from dex_agents.testing.mcp_server import McpHttpTestServer

    harness.require(Capability.MCP_TOOLS)
    directory = harness.state_root / f"mcp-{uuid.uuid4().hex[:8]}"
    directory.mkdir(parents=True)
    calls = directory / "mcp-calls.jsonl"
    script = ModelScript(
        [
            ModelTurn(tool_calls=[ToolCallSpec(tool, arguments)]),
            ModelTurn(text_from_tool_results=True),
        ]
    )
    # No release file is ever written: build_report runs until it is cancelled.
    with McpHttpTestServer(
        calls=calls,
        release=directory / "never-released",
        stateful=False,
        process_log=directory / "mcp-server.log",
    ) as server:
        # The harness sets the Flow type.
        session = ScenarioSession("McpScenario", mcp_server_url=server.url, tracing=tracing)
        async with harness.run(script, session=session) as run:
            yield run, McpServer(server.url, calls)


def _stored_text(value: Any) -> str:
    """A stored string Attribute's text (``""`` when it is absent)."""
    if value is None:
        return ""
    if value.string_value:
        return str(value.string_value)
    payload = value.obj_value.payload
    return str(json.loads(payload)) if payload else ""


def _waiting_for_task(snapshot: AgentSnapshot) -> bool:
    return any(r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in snapshot.tool_calls)


async def _wait_for_task(run: ScenarioRun) -> AgentSnapshot:
    return await run.sessions.wait_for_snapshot(
        run.session_id,
        _waiting_for_task,
        description=(
            "the MCP task handed to PollToolTask: the adapter's MCP tool raises the source's"
            " StartedToolTask from its tool Step, and tool_tasks= names the source"
        ),
    )


class McpScenarios:
    """An MCP task that asks the user, ``cancel_turn`` during a task, and the
    ``traceparent`` in ``_meta``."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.conformance,
        pytest.mark.asyncio,
    ]

    @contract_rule(ContractRule.MCP_TOOLS)
    async def test_an_mcp_task_asks_the_user_and_the_answer_completes_it(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        call = _one_mcp_call(conformance_harness, APPROVE, {"label": "q2"})
        async with call as (run, server):
            await run.start_session("approve the q2 report")
            (question,) = await run.sessions.wait_for_pending_interrupts(run.session_id, 1)
            [record] = (await run.sessions.snapshot(run.session_id)).tool_calls
            assert record.status is AgentToolCallStatus.AWAITING_ANSWER
            assert record.task_id is not None, "the question is the MCP task's"
            assert question.question == "Approve report q2?"
            assert question.choices == ("approve", "reject")
            assert question.interrupt_id == f"{FIRST_CALL}-input-1"
            assert await run.sessions.answer_question(
                run.session_id, question.interrupt_id, "approve"
            )
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            assert final_answer(snapshot) == f"{APPROVE}: report q2: approve"
            seen = run.model_call("turn-1", 1).details["tool_results"]
            assert seen == {FIRST_CALL: "report q2: approve"}, "the model saw the result"
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "succeeded"}
            steps = await run.step_types()
            (started,) = server.calls("approve_report")
            assert started["idempotency_key"] == f"{run.session_id}/turn-1/{FIRST_CALL}"
            updates = server.calls("tasks/update")
            assert updates, "the answer went back to the task (tasks/update)"
            assert {u["task_id"] for u in updates} == {record.task_id}
            assert updates[0]["responses"]["approval"]["content"] == {"decision": "approve"}
            assert steps.count("CallTool") == 1, "tools/call was sent from one tool Step"
            assert steps.count("PollToolTask") >= 2

    @contract_rule(ContractRule.MCP_TOOLS)
    async def test_cancel_turn_during_an_mcp_task_cancels_the_server_task(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        async with _one_mcp_call(conformance_harness, BUILD, {"label": "q3"}) as (run, server):
            await run.start_session("build the q3 report")
            snapshot = await _wait_for_task(run)
            [record] = snapshot.tool_calls
            assert await run.sessions.cancel_turn(run.session_id)
            snapshot = await run.sessions.wait_for_turn(run.session_id, 1)
            events = await run.sessions.read_events_through_turn(run.session_id, "turn-1")
            assert finished_statuses(events) == {FIRST_CALL: "outcome_unknown"}
            assert events[-1].type == "turn_cancelled"
            assert snapshot.state is not None
            assert snapshot.state.active_turn_id is None
            outputs = [m.tool_output for m in snapshot.messages if m.role == "tool"]
            texts = [m.text or "" for m in snapshot.messages]
            assert OUTCOME_UNKNOWN_TOOL_RESULT in outputs or any(
                BUILD in text and "outcome_unknown" in text for text in texts
            )
            assert "CancelToolTask" in await run.step_types()
            assert len(server.calls("build_report")) == 1
            cancels = server.calls("tasks/cancel")
            assert cancels, "cancel_turn sent tasks/cancel to the server (CancelToolTask)"
            assert {c["task_id"] for c in cancels} == {record.task_id}

    @contract_rule(ContractRule.MCP_TOOLS)
    async def test_an_mcp_tool_call_carries_the_traceparent_in_meta(
        self, conformance_harness: ConformanceHarness
    ) -> None:
        call = _one_mcp_call(conformance_harness, LOOKUP, {"order_id": "7"}, tracing=True)
        async with call as (run, server):
            await run.start_session("where is order 7?")
            snapshot = await run.sessions.wait_for_completed_turns(run.session_id, 1)
            assert_turn_succeeded(snapshot)
            assert final_answer(snapshot) == f"{LOOKUP}: order 7: shipped"
            attributes = await read_stored_attributes(run.engine.server_address, run.session_id)
            (logged,) = server.calls("lookup")
            assert logged["idempotency_key"] == f"{run.session_id}/turn-1/{FIRST_CALL}"
            sent = _TRACEPARENT.match(str(logged.get("traceparent")))
            assert sent is not None, (
                f"the tools/call _meta carried no W3C traceparent ({logged.get('traceparent')!r})"
            )
            root = _TRACEPARENT.match(_stored_text(attributes.get(TRACE_CONTEXT_ATTRIBUTE)))
            assert root is not None, "tracing is on: the session stored its trace context"
            assert sent.group(1) == root.group(1), "the call's span is in the session's trace"
            assert sent.group(2) != root.group(2), "the traceparent is the tool call's own span"
