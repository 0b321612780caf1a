"""Entry of the traced Worker children: one Step slot each (plus one for RPCs)."""

from __future__ import annotations

import sys

from dex_agents.testing import load_flows, run_agent_worker_process

if __name__ == "__main__":
    run_agent_worker_process(load_flows(sys.argv[1]), max_concurrent_tasks=2)
