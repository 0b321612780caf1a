"""A tool task across a Worker SIGKILL, on a one-slot Worker child.

The job runs in a real HTTP job service. While the session waits for it, no Step holds
the Worker's only slot (another session completes a turn), a killed Worker only delays
the next poll, and the tool that started the job ran once.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from dex_agents import AgentToolCallStatus
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)

FLOWS = Path(__file__).resolve().parent / "worker_flows"


def _import_job_service() -> object:
    sys.path.insert(0, str(FLOWS))
    try:
        import job_service  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.remove(str(FLOWS))
    return job_service  # pyright: ignore[reportUnknownVariableType]


async def test_task_completes_across_a_worker_sigkill_without_holding_a_slot(
    tmp_path: Path,
) -> None:
    jobs_module = _import_job_service()
    flow = jobs_module.build_flows()[0]  # type: ignore[attr-defined]
    with jobs_module.JobService() as service:  # type: ignore[attr-defined]
        child_environment = {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH")])),
            "JOB_SERVICE_URL": service.url,
        }
        waiting = f"reports-{uuid.uuid4().hex[:8]}"
        other = f"chat-{uuid.uuid4().hex[:8]}"
        async with await AgentTestEnvironment.start(flows=[flow]) as environment:
            sessions = AgentSessionTestClient(environment.client, flow)

            def start_worker(name: str) -> object:
                return environment.start_worker_process(
                    log_path=tmp_path / f"{name}.log",
                    arguments=[],
                    entry_module="job_worker",
                    environment=child_environment,
                )

            first = start_worker("first")
            await sessions.start_session(waiting, "report please: slow")
            snapshot = await sessions.wait_for_snapshot(
                waiting,
                lambda s: any(
                    r.status is AgentToolCallStatus.WAITING_FOR_TASK for r in s.tool_calls
                ),
                description="the report task is started",
            )
            record = snapshot.tool_calls[0]
            assert record.task_id == "job-1"
            assert record.task_poll_interval_seconds == 1
            first.kill()  # type: ignore[attr-defined]

            start_worker("second")
            # The Worker's only slot is free while the task waits: another session runs.
            await sessions.start_session(other, "hello")
            chat = await sessions.wait_for_completed_turns(other, 1)
            assert chat.messages[-1].text == "echo: hello"
            still = await sessions.snapshot(waiting)
            assert still.tool_calls[0].status is AgentToolCallStatus.WAITING_FOR_TASK

            service.finish("job-1", "report ready")
            done = await sessions.wait_for_completed_turns(waiting, 1)
            history = await read_step_history(environment.server_address, waiting)

    assert done.messages[-1].text == "report ready"
    key = f"{waiting}/turn-1/{record.tool_call_id}"
    assert service.start_requests[key] == 1
    assert len(service.jobs) == 1
    steps = executed_step_types(history)
    assert steps.count("CallTool") == 1
    assert steps.count("PollToolTask") >= 1
