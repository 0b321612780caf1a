"""A short seeded kill-anywhere run: Workers and the engine SIGKILLed at random moments
across concurrent sessions of Stepwise and every adapter at once, with zero invariant
violations.

``nox -s fuzz`` runs the long version; see the core README for its figures.
"""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing.kill_fuzz import RUNNER_FACTORIES, available_runners, run_kill_fuzz


async def test_a_seeded_kill_anywhere_run_breaks_no_invariant(tmp_path: Path) -> None:
    # The workspace installs every adapter, so each runner's sessions run in the same mix.
    assert available_runners() == list(RUNNER_FACTORIES)
    report = await run_kill_fuzz(seed=19, kills=8, sessions=1, workers=3, state_directory=tmp_path)
    print("\n" + report.summary(), *report.violations, sep="\n")
    assert report.kills == 8
    assert report.engine_kills >= 1
    assert report.violations == []
    # Every runner's sessions ran, and each completed a turn once the kills stopped.
    assert set(report.turns_by_runner) == set(RUNNER_FACTORIES)
    assert all(turns >= 1 for turns in report.turns_by_runner.values())
    assert report.tool_runs >= 3 * len(RUNNER_FACTORIES)
