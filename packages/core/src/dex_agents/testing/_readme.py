"""Run a README's Python examples as tests: every block in its own interpreter.

Each block runs with ``python -c`` in a fresh directory and without provider API
keys, so an example that drifts from the API, reaches a network, or needs a name
it never defines fails its test. The core and every adapter use this for their
READMEs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReadmeExample", "readme_examples", "run_readme_example"]

API_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@dataclass(frozen=True)
class ReadmeExample:
    """One fenced ``python`` block: ``name`` is ``"<section> #<n>"``."""

    name: str
    code: str


def readme_examples(readme: Path, sections: Collection[str] | None = None) -> list[ReadmeExample]:
    """The ``python`` blocks of ``readme``, in order; only those under ``sections`` when given.

    A section is a ``## `` heading; its ``### `` subsections belong to it.
    """
    examples: list[ReadmeExample] = []
    section = ""
    for part in re.split(r"(?m)^(## .+)$", readme.read_text(encoding="utf-8")):
        if part.startswith("## "):
            section = part[3:].strip()
            continue
        if sections is not None and section not in sections:
            continue
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", part, re.DOTALL)):
            examples.append(ReadmeExample(f"{section} #{index + 1}", code))
    return examples


def run_readme_example(
    example: ReadmeExample, directory: Path, *, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``example`` in ``directory`` without API keys; ``AssertionError`` when it fails."""
    environment = {key: value for key, value in os.environ.items() if key not in API_KEY_VARIABLES}
    result = subprocess.run(
        [sys.executable, "-c", example.code],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{example.name} failed:\n{result.stdout}\n{result.stderr}")
    return result
