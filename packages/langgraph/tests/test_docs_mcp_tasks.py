"""The example of the docs page on MCP tasks (docs/mcp-tasks.md) runs as written, offline."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import readme_examples, run_readme_example

PAGE = Path(__file__).resolve().parents[3] / "docs" / "mcp-tasks.md"


def test_the_mcp_task_question_example_runs(tmp_path: Path) -> None:
    (example,) = readme_examples(PAGE, {"Example (LangGraph)"})
    run_readme_example(example, tmp_path)
