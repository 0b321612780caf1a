"""``python -m dex_agents.testing.scenario_worker module:factory``: a scenario's Worker child.

Reads ``scenario.json`` from ``DEX_AGENTS_TEST_STATE_DIR``, builds the Flow with
the named scenario factory and serves it until SIGTERM.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dex_agents.testing._scenario_flow import STATE_DIRECTORY_VARIABLE, build_scenario_flow
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
    run_agent_worker_process([build_scenario_flow(argv[0], Path(state_directory))])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
