"""The package installs under its dist name and keeps the workspace's one version line."""

import tomllib
from importlib.metadata import requires
from pathlib import Path

import dex_agents_langgraph

ROOT = Path(__file__).resolve().parents[3]


def test_version_is_the_workspace_version() -> None:
    workspace = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert dex_agents_langgraph.__version__ == workspace["project"]["version"]


def test_pinned_project_dependencies_use_the_same_version() -> None:
    pins = [
        r
        for r in requires("dex-agents-langgraph") or []
        if r.startswith(("dex-agents==", "dex-local-engine=="))
    ]
    for pin in pins:
        assert pin.split("==", 1)[1].split(";")[0].strip() == dex_agents_langgraph.__version__
