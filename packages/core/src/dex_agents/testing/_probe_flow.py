"""``ProbeFlow``: a one-Step Flow that checks an engine and Worker setup end to end.

Its Step sends a heartbeat, records each run in ``<state>/probe-runs.jsonl``, passes the FileGate
``probe``, and completes the Flow with its input upper-cased. A test can SIGKILL
the Worker while the Step waits at the gate and see the Step run again on a new
Worker. The state directory comes from ``DEX_AGENTS_TEST_STATE_DIR``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import cast

import dex

from dex_agents.testing._gates import FileGate, InvocationLog

STATE_DIRECTORY_VARIABLE = "DEX_AGENTS_TEST_STATE_DIR"
PROBE_GATE = "probe"
PROBE_RUNS_LOG = "probe-runs.jsonl"


def _state_directory() -> Path:
    value = os.environ.get(STATE_DIRECTORY_VARIABLE)
    if not value:
        raise RuntimeError(f"set {STATE_DIRECTORY_VARIABLE} to the test's state directory")
    return Path(value)


class ProbeStep(dex.Step[str]):
    async def execute(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, context: dex.AsyncContext, input: str
    ) -> dex.StepDecision:
        state = _state_directory()
        # A heartbeat first tells the engine this attempt started: a Worker killed after
        # it costs the attempt (the rerun is attempt 2); one killed before any output is
        # requeued as the same attempt, as Dex does.
        await context.heartbeat()
        InvocationLog(state / PROBE_RUNS_LOG).record("probe", details={"input": input})
        await FileGate(state, PROBE_GATE).pass_through_async()
        return dex.graceful_complete(input.upper())

    def get_step_options(self) -> dex.StepOptions | None:
        return dex.StepOptions(
            heartbeat_timeout=timedelta(seconds=10),
            execute_retry=dex.RetryPolicy(
                initial_interval=timedelta(seconds=1), maximum_attempts=5
            ),
        )


class ProbeFlow(dex.Flow[str]):
    def get_steps(self) -> dex.StepList[str]:
        return cast(
            dex.StepList[str],
            dex.StepList.start_step(ProbeStep()),  # pyright: ignore[reportUnknownMemberType]
        )


def build_probe_flow() -> ProbeFlow:
    """Zero-argument factory for ``python -m dex_agents.testing.worker_main``."""
    return ProbeFlow()
