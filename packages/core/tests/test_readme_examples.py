"""Every Python example of the core README's session and Stepwise sections runs as written.

Each block runs in its own interpreter, in a fresh directory, without API keys, so an
example that drifts from the API (or needs a name it never defines) fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# The sections this test owns; "Testing" and "Benchmarks" are checked by their owners.
SECTIONS = ("Usage", "The runner contract", "Stepwise", "Function tools", "Model clients")


def _python_blocks() -> list[tuple[str, str]]:
    blocks: list[tuple[str, str]] = []
    section = ""
    for part in re.split(r"(?m)^(## .+)$", README.read_text(encoding="utf-8")):
        if part.startswith("## "):
            section = part[3:].strip()
            continue
        if section not in SECTIONS:
            continue
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", part, re.DOTALL)):
            blocks.append((f"{section} #{index + 1}", code))
    return blocks


BLOCKS = _python_blocks()


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert {name.split(" #")[0] for name, _ in BLOCKS} >= {
        "Usage",
        "The runner contract",
        "Stepwise",
        "Function tools",
    }


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_example_runs(name: str, code: str, tmp_path: Path) -> None:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    if name.startswith("Usage"):
        assert "1 user: Refund order 42" in result.stdout
        assert "2 assistant: Done: refunded order 42" in result.stdout
