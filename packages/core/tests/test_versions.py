"""The one version line: `dex-agents version` and the adapters' import-time check.

A distribution off the line is made real, not mocked: a ``*.dist-info`` directory
earlier on the path is what Python's metadata lookup finds first, exactly as a stale
wheel installed with ``--no-deps`` would be.
"""

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from dex_agents import __version__
from dex_agents import _cli as cli
from dex_agents._versions import installed_line_versions, line_mismatches

ADAPTERS = {
    "dex_agents_openai_agents": "dex-agents-openai-agents",
    "dex_agents_langgraph": "dex-agents-langgraph",
    "dex_agents_pydantic_ai": "dex-agents-pydantic-ai",
    "dex_agents_claude_sdk": "dex-agents-claude-sdk",
}
STALE = "0.0.1"


def install_metadata(directory: Path, name: str, version: str) -> None:
    dist_info = directory / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n"
    )


def test_every_workspace_distribution_is_on_the_core_version_line() -> None:
    versions = installed_line_versions()
    assert next(iter(versions)) == "dex-agents"
    assert {
        "dex-agents",
        "dex-local-engine",
        "dex-agents-conformance",
        *ADAPTERS.values(),
    } <= set(versions)
    assert line_mismatches(versions) == {}


def test_version_flags_any_dex_agents_distribution_off_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_metadata(tmp_path, "dex-agents-acme", STALE)
    monkeypatch.syspath_prepend(str(tmp_path))

    assert cli.main(["version"]) == 1

    captured = capsys.readouterr()
    assert f"dex-agents-acme            {STALE}  (does not match dex-agents {__version__})" in (
        captured.out
    )
    assert f"dex-agents {__version__}" in captured.out
    assert f"pip install 'dex-agents-acme=={__version__}'" in captured.err


def import_adapters(modules: list[str], path: Path) -> list[str]:
    """Import ``modules`` in a fresh interpreter with ``path`` first; the warnings given.

    Each adapter is checked a second time after its import, which must not warn again.
    """
    script = (
        "import json, warnings\n"
        "from dex_agents._versions import VersionMismatchWarning, warn_if_off_version_line\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        + "".join(
            f"    import {module}\n    warn_if_off_version_line({ADAPTERS[module]!r})\n"
            for module in modules
        )
        + "print(json.dumps([str(w.message) for w in caught\n"
        "                  if issubclass(w.category, VersionMismatchWarning)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_an_adapter_off_the_line_warns_once_naming_both_versions(
    tmp_path: Path,
) -> None:
    # One interpreter for all four: importing them is slow on a loaded machine. Without the
    # stale metadata they do not warn (test_every_workspace_distribution_is_on_...).
    modules = [module for module in ADAPTERS if find_spec(module) is not None]
    for module in modules:
        install_metadata(tmp_path, ADAPTERS[module], STALE)
    messages = import_adapters(modules, tmp_path)

    assert len(messages) == len(modules)
    for module, message in zip(modules, messages, strict=True):
        dist = ADAPTERS[module]
        assert f"{dist} {STALE} is installed with dex-agents {__version__}" in message
        assert f"pip install '{dist}=={__version__}'" in message
