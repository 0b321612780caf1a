"""Run the Python examples of a README or a documentation page as tests.

Each block runs with ``python -c`` in a fresh directory and without provider API
keys, so an example that drifts from the API, reaches a network, or needs a name
it never defines fails its test. The core and every adapter use this for their
READMEs and their pages of the documentation site.

A block that cannot run as it stands (it needs an API key, or it is a fragment of
a larger program) says so with an HTML comment on the line right before its fence,
``<!-- not-run: needs an API key -->``; ``markdown_examples`` returns it with that
reason, and ``readme_examples`` leaves it out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReadmeExample", "markdown_examples", "readme_examples", "run_readme_example"]

API_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
# An example uses the public import paths: a DeprecationWarning of dex-agents or the local
# engine fails it, as it fails the project's own tests (pyproject's filterwarnings).
_DEPRECATIONS_ARE_ERRORS = [
    f"-Werror:{prefix}:DeprecationWarning"
    for prefix in ("dex_agents", "module dex_agents", "dex_local_engine", "module dex_local_engine")
]
# A fence opens with ``` and a language, then an optional info string (```python title="x").
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<language>[^\s`]*)[^\n`]*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "pycon"})
"""Fence languages that hold Python: each such block runs or carries a not-run reason."""


@dataclass(frozen=True)
class ReadmeExample:
    """One fenced Python block: ``name`` is ``"<section> #<n>"``, the section being the
    ``## `` heading above it (or the ``# `` title above the first); ``not_run`` is the
    reason of its ``not-run`` marker, if any; ``line`` is the fence's line number (from 1)
    in its file."""

    name: str
    code: str
    not_run: str | None = None
    line: int = 0


def markdown_examples(path: Path) -> list[ReadmeExample]:
    """Every fenced Python block of the Markdown file ``path``, in order, marked or not.

    A block's ``not_run`` reason comes from a ``<!-- not-run: reason -->`` comment on the
    line right before its fence; a marker with an empty reason raises ``ValueError``, and
    so does a fence that never closes.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    examples: list[ReadmeExample] = []
    section = ""
    counts: dict[str, int] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith(("# ", "## ")):  # the page's title names the blocks above a section
            section = line.partition(" ")[2].strip()
        fence = _FENCE.match(line)
        if fence is None:
            index += 1
            continue
        closing = next(
            (end for end in range(index + 1, len(lines)) if lines[end].strip() == fence["ticks"]),
            None,
        )
        if closing is None:
            raise ValueError(f"{path}:{index + 1}: the code fence never closes")
        if fence["language"].lower() in PYTHON_LANGUAGES:
            indent = len(fence["indent"])
            code = "\n".join(body[indent:] for body in lines[index + 1 : closing]) + "\n"
            marker = _NOT_RUN.match(lines[index - 1]) if index > 0 else None
            reason = marker["reason"] if marker else None
            if reason == "":
                raise ValueError(f"{path}:{index}: a not-run marker needs a reason")
            counts[section] = counts.get(section, 0) + 1
            name = f"{section} #{counts[section]}"
            examples.append(ReadmeExample(name, code, reason, index + 1))
        index = closing + 1
    return examples


def readme_examples(readme: Path, sections: Collection[str] | None = None) -> list[ReadmeExample]:
    """The Python blocks of ``readme`` that run, in order; only those under ``sections``
    when given. Blocks marked ``not-run`` are left out.

    A section is a ``## `` heading; its ``### `` subsections belong to it.
    """
    return [
        example
        for example in markdown_examples(readme)
        if example.not_run is None
        and (sections is None or example.name.rsplit(" #", 1)[0] in sections)
    ]


def run_readme_example(
    example: ReadmeExample, directory: Path, *, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``example`` in ``directory`` without API keys; ``AssertionError`` when it fails.

    A ``DeprecationWarning`` of dex-agents (an old import path) fails the example too.
    """
    environment = {key: value for key, value in os.environ.items() if key not in API_KEY_VARIABLES}
    result = subprocess.run(
        [sys.executable, *_DEPRECATIONS_ARE_ERRORS, "-c", example.code],
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
