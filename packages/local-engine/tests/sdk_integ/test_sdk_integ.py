"""Runs the Dex SDK's own integration scenarios against the local engine.

Needs a local clone of the Dex repository named by ``DEX_REPO``; without one
these tests skip and say so.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load_harness() -> ModuleType:
    path = Path(__file__).with_name("run_sdk_integ.py")
    spec = importlib.util.spec_from_file_location("dex_local_engine_sdk_integ_harness", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


def _repo_or_skip() -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed, so the Dex scenarios cannot be exported")
    try:
        return harness.resolve_repo(None)
    except harness.HarnessError as error:
        pytest.skip(f"Dex SDK integration scenarios unavailable: {error}")


def test_harness_exports_and_adapts_a_temporary_copy(tmp_path: Path) -> None:
    repo = _repo_or_skip()
    root = harness.export_scenarios(repo, tmp_path)
    applied = harness.adapt_scenarios(root)
    assert any("pull-mode" in entry for entry in applied)
    assert harness.SHIMS_MODULE in (root / "environment.py").read_text()
    assert (root / f"{harness.SHIMS_MODULE}.py").read_text() == harness.SHIMS_FILE.read_text()
    # Every scenario module imports against dex-python-sdk 1.23.0 once shimmed.
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(root.parent.parent / "pytest.ini"),
            "--rootdir",
            str(root.parent.parent),
            "--collect-only",
            "-q",
            *[str(path) for path in harness.scenario_files(root)],
        ],
        cwd=root.parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "error" not in collected.stdout.lower().splitlines()[-1]


@pytest.mark.timeout(1800)
def test_dex_sdk_integration_scenarios_pass_against_local_engine() -> None:
    _repo_or_skip()
    report = harness.run_harness(stream_output=False)
    table = harness.format_table(report)
    print(table)
    assert report.results, "the harness ran no scenarios"
    assert not report.unexpected_failures, table
