"""Every Python block of every README and documentation page runs, or says why not.

Each block runs in its own interpreter, in a fresh directory, without API keys and with
dex-agents' DeprecationWarnings as errors, so an example that drifts from the API (or
needs a name it never defines, or an old import path) fails here. This module runs the
blocks of every README (the core's, each adapter's, the engine's, ...) and of every page
of ``docs/`` but the ones in ``RUN_ELSEWHERE``, whose tests serve or trace them; a block
that cannot run carries a ``<!-- not-run: reason -->`` marker, and
``test_every_python_block_runs_or_says_why`` fails for a file whose blocks nothing runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.testing import (
    ReadmeExample,
    markdown_examples,
    readme_examples,
    run_readme_example,
)

ROOT = Path(__file__).resolve().parents[3]
# Every Markdown file a user reads: the READMEs of the repository and its packages, and
# the documentation site's pages.
DOCUMENTED = ("README.md", "*/README.md", "*/*/README.md", "docs/**/*.md")
# Files whose blocks another test runs; that test names the file.
RUN_ELSEWHERE = {
    "docs/concepts/tracing.md": "packages/core/tests/tracing/test_tracing_readme.py",
    "docs/concepts/ui-streams.md": "packages/core/tests/ui_stream/test_ui_stream_readme.py",
}
ADAPTERS = ("pydantic-ai", "openai-agents", "langgraph", "claude-sdk")


def documented_files() -> list[str]:
    """The repository-relative paths of every Markdown file users read."""
    return sorted(
        {str(path.relative_to(ROOT)) for pattern in DOCUMENTED for path in ROOT.glob(pattern)}
    )


EXAMPLES = [
    (path, example)
    for path in documented_files()
    if path not in RUN_ELSEWHERE
    for example in readme_examples(ROOT / path)
]


def test_the_docs_have_the_examples_this_test_runs() -> None:
    names = {(path, example.name.split(" #")[0]) for path, example in EXAMPLES}
    assert names >= {
        ("packages/core/README.md", "Usage"),
        ("docs/conformance.md", "The runner contract"),
        ("docs/runners/stepwise.md", "Stepwise"),
        ("docs/runners/stepwise.md", "Function tools"),
        ("docs/concepts/mcp.md", "MCP"),
        ("docs/testing.md", "Testing"),
    }


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_adapter_s_readme_has_a_usage_example_and_its_page_a_testing_recipe(
    adapter: str,
) -> None:
    readme = readme_examples(ROOT / f"packages/{adapter}/README.md")
    page = readme_examples(ROOT / f"docs/runners/{adapter}.md")
    assert readme[0].name.startswith("Usage")
    assert "Testing your agent" in [example.name.split(" #")[0] for example in page]


def test_no_readme_is_over_400_lines_and_a_package_s_has_one_example() -> None:
    """A README is an overview, the install and one example; the guide is in ``docs/``."""
    readmes = [path for path in documented_files() if path.endswith("README.md")]
    lengths = {
        path: len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in readmes
    }
    assert {path: n for path, n in lengths.items() if n > 400} == {}
    examples = {path: len(markdown_examples(ROOT / path)) for path in readmes}
    assert {
        path: n for path, n in examples.items() if path.startswith("packages/") and n != 1
    } == {}


def test_every_python_block_runs_or_says_why() -> None:
    """A file's unmarked blocks run here or in the test ``RUN_ELSEWHERE`` names (which must
    read that file); a marked block gives its reason (``markdown_examples`` checks that)."""
    unrun: list[str] = []
    for path in documented_files():
        examples = markdown_examples(ROOT / path)  # raises for a bad fence or marker
        runnable = [example for example in examples if example.not_run is None]
        if not runnable or path not in RUN_ELSEWHERE:
            continue
        test = ROOT / RUN_ELSEWHERE[path]
        if not test.is_file() or path not in test.read_text(encoding="utf-8"):
            unrun.extend(f"{path}:{example.line} ({example.name})" for example in runnable)
    assert unrun == [], "blocks that no test runs and no not-run marker excuses"


def test_the_marker_excuses_a_block_and_a_block_without_one_runs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Setup\n\n"
        '<!-- not-run: needs an API key -->\n```python title="app.py"\nconnect()\n```\n\n'
        "```bash\nls\n```\n\n## Run\n\n```python\nprint(1)\n```\n\n"
        "- in a list:\n\n  ```py\n  print(2)\n  ```\n",
        encoding="utf-8",
    )
    examples = markdown_examples(page)
    assert [(e.name, e.code, e.not_run, e.line) for e in examples] == [
        ("Setup #1", "connect()\n", "needs an API key", 6),
        ("Run #1", "print(1)\n", None, 16),
        ("Run #2", "print(2)\n", None, 22),
    ]
    assert [example.name for example in readme_examples(page)] == ["Run #1", "Run #2"]
    assert [example.name for example in readme_examples(page, ["Setup"])] == []


@pytest.mark.parametrize(
    "marker", ["<!-- not-run: -->", "<!-- not-run:    -->"], ids=["empty", "blank"]
)
def test_a_marker_without_a_reason_is_refused(tmp_path: Path, marker: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"{marker}\n```python\nx = 1\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs a reason"):
        markdown_examples(page)


def test_an_unclosed_fence_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="never closes"):
        markdown_examples(page)


@pytest.mark.parametrize(
    ("path", "example"), EXAMPLES, ids=[f"{path}:{example.name}" for path, example in EXAMPLES]
)
def test_example_runs(path: str, example: ReadmeExample, tmp_path: Path) -> None:
    result = run_readme_example(example, tmp_path)
    if (path, example.name) == ("packages/core/README.md", "Usage #1"):
        assert "1 user: Refund order 42" in result.stdout
        assert "2 assistant: Done: refunded order 42" in result.stdout
    if path == "docs/concepts/sessions.md" and "send_user_message_and_wait(" in example.code:
        assert result.stdout.splitlines() == [
            "turn_completed",
            "turn_completed",
            "['hello', 'You said: hello', 'again', 'You said: again']",
        ]
    if path in {f"packages/{adapter}/README.md" for adapter in ADAPTERS}:
        assert example.name.startswith("Usage")  # the README's one example
        assert "Done: refunded order 42" in result.stdout  # runs a session to its answer
    if path == "packages/pydantic-ai/README.md":
        # deps_factory is an async context manager: it is exited once per Step
        # (the model step, the tool call, the model step after it).
        assert result.stdout.count("connection closed") == 3
    if (path, example.name) == ("docs/testing.md", "Testing #1"):
        assert "charge_card ran 1 time(s)" in result.stdout
        assert "'RecordToolOutcomeUnknown'" in result.stdout
