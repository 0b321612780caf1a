"""The Tracing page's example (``docs/concepts/tracing.md``) runs as written and prints
its spans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dex_agents.testing import readme_examples

PAGE = Path(__file__).resolve().parents[4] / "docs/concepts/tracing.md"


def test_the_tracing_example_prints_its_spans(tmp_path: Path) -> None:
    (example,) = readme_examples(PAGE)  # the page's one runnable block
    code = example.code
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The scripted model client reports "scripted" as its request model.
    assert result.stdout.splitlines() == [
        "invoke_agent Triage session-1",
        "chat scripted session-1",
    ]
