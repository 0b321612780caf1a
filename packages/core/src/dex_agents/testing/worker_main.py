"""``python -m dex_agents.testing.worker_main module:factory [...]``: a test Worker child.

Each argument names a zero-argument factory returning a Flow or a list of Flows.
The Worker serves them all until SIGTERM; the engine address comes from
``DEX_SERVER_ADDRESS``.
"""

from __future__ import annotations

import sys
from typing import Any

import dex

from dex_agents.testing._worker_process import load_flows, run_agent_worker_process


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m dex_agents.testing.worker_main module:factory [...]")
        return 2
    flows: list[dex.Flow[Any]] = []
    for factory_path in argv:
        flows.extend(load_flows(factory_path))
    run_agent_worker_process(flows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
