"""Worker child entry for the tool task tests: the job reports agent on a one-slot Worker,
so a test can show that a waiting task holds no Worker slot."""

from __future__ import annotations

from job_service import build_flows  # pyright: ignore[reportMissingImports]

from dex_agents.testing import run_agent_worker_process

if __name__ == "__main__":
    run_agent_worker_process(
        build_flows(), max_concurrent_tasks=2
    )  # one Step slot; one is kept for RPCs
