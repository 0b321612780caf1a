"""Every Python example of the core README runs as written.

Each block runs in its own interpreter, in a fresh directory, without API keys, so an
example that drifts from the API (or needs a name it never defines) fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.testing import ReadmeExample, readme_examples, run_readme_example

README = Path(__file__).resolve().parents[1] / "README.md"
# Every section with a Python example.
SECTIONS = (
    "Usage",
    "The runner contract",
    "Stepwise",
    "Function tools",
    "Tool tasks",
    "MCP tools",
    "Model clients",
    "Testing",
)
EXAMPLES = readme_examples(README, SECTIONS)


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert {example.name.split(" #")[0] for example in EXAMPLES} >= {
        "Usage",
        "The runner contract",
        "Stepwise",
        "Function tools",
        "MCP tools",
        "Testing",
    }


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_example_runs(example: ReadmeExample, tmp_path: Path) -> None:
    result = run_readme_example(example, tmp_path)
    if example.name.startswith("Usage"):
        assert "1 user: Refund order 42" in result.stdout
        assert "2 assistant: Done: refunded order 42" in result.stdout
    if example.name.startswith("Testing"):
        assert "charge_card ran 1 time(s)" in result.stdout
        assert "'RecordToolOutcomeUnknown'" in result.stdout
