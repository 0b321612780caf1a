"""The README's Tracing example runs as written and prints its spans."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_tracing_example_prints_its_spans(tmp_path: Path) -> None:
    section = README.read_text(encoding="utf-8").split("## Tracing", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
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
