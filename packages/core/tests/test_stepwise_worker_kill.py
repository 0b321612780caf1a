"""SIGKILL of a Stepwise Worker while the session waits on a question and a durable timer.

The waits are committed state, so a new Worker child picks them up: the answer and the
skipped Timer reach the same turn, and no model call or wait is repeated.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import dex

from dex_agents import AgentToolCallStatus
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)

FLOWS = Path(__file__).resolve().parent / "worker_flows"
FACTORY = "stepwise_waits:build_flows"


async def test_sigkill_while_waiting_on_a_question_and_a_timer(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(FLOWS))
    try:
        from stepwise_waits import build_flows  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.remove(str(FLOWS))
    flow = build_flows()[0]
    child_environment = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH")]))
    }
    session_id = f"waits-{uuid.uuid4().hex[:8]}"
    async with await AgentTestEnvironment.start(flows=[flow]) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        first = environment.start_worker_process(
            log_path=tmp_path / "first.log", arguments=[FACTORY], environment=child_environment
        )
        await sessions.start_session(session_id, "ask me, then wait")
        await sessions.wait_for_snapshot(
            session_id,
            lambda s: (
                bool(s.pending_interrupts)
                and any(r.status is AgentToolCallStatus.WAITING_FOR_TIMER for r in s.tool_calls)
            ),
            description="a pending question and a waiting durable timer",
        )
        first.kill()

        environment.start_worker_process(
            log_path=tmp_path / "second.log", arguments=[FACTORY], environment=child_environment
        )
        question = (await sessions.snapshot(session_id)).pending_interrupts[0]
        assert question.choices == ("yes", "no")
        assert await sessions.answer_question(session_id, question.interrupt_id, "yes")
        await environment.client.skip_timer(
            session_id,
            dex.StepExecutionId("AwaitTimer", 1),
            dex.TimerId.by_condition_id("durable_wait"),
        )
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        history = await read_step_history(environment.server_address, session_id)

    assert snapshot.messages[-1].text == (
        '{"status":"answered","answer":"yes"} | '
        '{"status":"completed","waited_seconds":3600,"reason":"cool down"}'
    )
    steps = executed_step_types(history)
    assert steps.count("RunModel") == 2
    assert steps.count("AwaitQuestionAnswer") == 1
    assert steps.count("AwaitTimer") == 1
