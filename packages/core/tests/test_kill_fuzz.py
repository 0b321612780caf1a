"""A short seeded kill-anywhere run: Workers and the engine SIGKILLed at random moments
across concurrent Stepwise sessions, with zero invariant violations.

``nox -s fuzz`` runs the long version; see the core README for its figures.
"""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing.kill_fuzz import run_kill_fuzz


async def test_a_seeded_kill_anywhere_run_breaks_no_invariant(tmp_path: Path) -> None:
    report = await run_kill_fuzz(seed=19, kills=6, sessions=3, turns=2, state_directory=tmp_path)
    print("\n" + report.summary())
    assert report.kills == 6
    assert report.engine_kills >= 1
    assert report.turns_completed == 3 * 2
    assert report.violations == []
