"""A short seeded fault-injection run: a token-secured engine, two Worker processes and
this process as the client, with a TCP proxy between them breaking links while sessions
of Stepwise and every adapter run turns; zero invariant violations.

``nox -s faults`` runs the long version; docs/fault-injection.md has its figures.
"""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing.fault_injection import FAULT_KINDS, available_runners, run_fault_injection
from dex_agents.testing.kill_fuzz import RUNNER_FACTORIES


async def test_a_seeded_run_of_every_fault_between_processes_breaks_no_invariant(
    tmp_path: Path,
) -> None:
    # The workspace installs every adapter, so each runner's sessions run in the same mix.
    assert available_runners() == list(RUNNER_FACTORIES)
    report = await run_fault_injection(
        seed=33,
        faults=2 * len(FAULT_KINDS),
        sessions=len(RUNNER_FACTORIES),
        partition_seconds=25,  # past the 20 s the engine takes to find a silent Worker
        state_directory=tmp_path,
    )
    print("\n" + report.summary(), *report.violations, sep="\n")
    assert report.violations == []
    assert report.token
    # Every kind of fault was injected, and every runner's session completed turns.
    assert report.faults_injected == 2 * len(FAULT_KINDS)
    assert all(report.faults[kind] >= 1 for kind in FAULT_KINDS)
    assert set(report.turns_by_runner) == set(RUNNER_FACTORIES)
    assert all(turns >= 1 for turns in report.turns_by_runner.values())
