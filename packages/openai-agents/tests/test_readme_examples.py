"""Every Python example of this package's README and of its documentation page
(``docs/runners/openai-agents.md``) runs as written, offline and without keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.testing import ReadmeExample, readme_examples, run_readme_example

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "packages/openai-agents/README.md"
PAGE = ROOT / "docs/runners/openai-agents.md"
EXAMPLES = readme_examples(README) + readme_examples(PAGE)


def test_the_readme_has_a_usage_example_and_the_page_a_testing_recipe() -> None:
    sections = [example.name.split(" #")[0] for example in EXAMPLES]
    assert sections[0].startswith("Usage")
    assert "Testing your agent" in sections


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_example_runs(example: ReadmeExample, tmp_path: Path) -> None:
    result = run_readme_example(example, tmp_path)
    if example == EXAMPLES[0]:  # the Usage example runs a session to its answer
        assert "Done: refunded order 42" in result.stdout
