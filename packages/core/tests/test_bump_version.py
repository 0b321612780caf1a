"""``scripts/bump_version.py`` moves every package, pin and install line at once.

It runs on a copy of the repository's real pyprojects and READMEs.
"""

import importlib.util
import re
import shutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from dex_agents import __version__

ROOT = Path(__file__).resolve().parents[3]
NEW = "0.2.0"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bump_version", ROOT / "scripts/bump_version.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """Every file the script edits, copied into a tree of the same shape."""
    for path in load_script().files_to_bump(ROOT):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return tmp_path


def test_every_version_pin_and_install_line_moves_to_the_new_version(checkout: Path) -> None:
    script = load_script()
    changed = script.bump(checkout, NEW)

    in_repository = [*ROOT.glob("pyproject.toml"), *ROOT.glob("*/pyproject.toml")]
    in_repository += ROOT.glob("packages/*/pyproject.toml")
    pyprojects = [checkout / path.relative_to(ROOT) for path in in_repository]
    assert set(pyprojects) <= set(changed)
    for path in pyprojects:
        assert tomllib.loads(path.read_text())["project"]["version"] == NEW
    old_pin = re.compile(rf"(dex-agents[\w-]*|dex-local-engine)=={re.escape(__version__)}\b")
    for path in [*checkout.rglob("*.toml"), *checkout.rglob("*.md")]:
        assert not old_pin.search(path.read_text()), path
    readme = (checkout / "README.md").read_text()
    assert f"| every `dex-agents*` package and `dex-local-engine` | `{NEW}` |" in readme
    assert f"pip install --find-links dist dex-agents-pydantic-ai=={NEW}" in readme


@pytest.mark.parametrize("version", ["", "two", "1.0-final", __version__])
def test_a_bad_or_unchanged_version_is_refused_and_nothing_is_written(
    checkout: Path, version: str
) -> None:
    before = {path: path.read_text() for path in checkout.rglob("*.*")}
    with pytest.raises(ValueError, match=r"version|already at"):
        load_script().bump(checkout, version)
    assert {path: path.read_text() for path in checkout.rglob("*.*")} == before
