"""``python -m dex_agents.testing.scenario_worker module:factory``: a scenario's Worker child.

Reads ``scenario.json`` from ``DEX_AGENTS_TEST_STATE_DIR``, builds the Flow with
the named scenario factory and serves it until SIGTERM. A scenario with
``ScenarioSession.tracing`` gets an OpenTelemetry SDK ``TracerProvider`` as the global
provider first (the ``otel`` extra).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dex_agents.testing._scenario_flow import STATE_DIRECTORY_VARIABLE, build_scenario_flow
from dex_agents.testing._scripts import Scenario
from dex_agents.testing._worker_process import run_agent_worker_process


def main(argv: list[str]) -> int:
    state_directory = os.environ.get(STATE_DIRECTORY_VARIABLE)
    if len(argv) != 1 or not state_directory:
        print(
            "usage: DEX_AGENTS_TEST_STATE_DIR=<dir> python -m"
            " dex_agents.testing.scenario_worker module:factory",
            file=sys.stderr,
        )
        return 2
    if Scenario.read(Path(state_directory)).session.tracing:
        _install_tracer_provider()
    run_agent_worker_process([build_scenario_flow(argv[0], Path(state_directory))])
    return 0


def _install_tracer_provider() -> None:
    """An SDK provider as the global one: sessions with default tracing emit real spans."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
