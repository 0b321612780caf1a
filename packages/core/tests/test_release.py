"""The release tooling: the README's version tables and the version bump script.

The root README's framework rows are exactly the ranges ``nox -s compat`` tests (its
``FRAMEWORKS``), each with the range its pyproject claims and that range's lower bound
as the oldest version tested; its version rows are the workspace version, the Dex SDK pin
and Python. ``scripts/bump_version.py`` runs on a copy of the real pyprojects and READMEs.
"""

import importlib.util
import re
import shutil
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from dex_agents import __version__

ROOT = Path(__file__).resolve().parents[3]
SECTION = "## Versions and compatibility"
NEW = "0.2.0"


def load_repository_module(relative_path: str) -> ModuleType:
    """A Python file of the repository that is not in a package (noxfile, scripts)."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(f"dex_agents_repo_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_tables() -> list[list[list[str]]]:
    """The Markdown tables of the README's section, as rows of cells (header rows left out)."""
    text = (ROOT / "README.md").read_text()
    assert SECTION in text, f"the root README has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current[2:])  # header and separator
            current = []
    return tables


def project(directory: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"]


def package_label(directory: str, framework: str) -> str:
    """``dist`` for a dependency, ``dist[extra]`` for an extra's."""
    table = project(directory)
    for extra, lines in table.get("optional-dependencies", {}).items():
        if any(line.startswith(framework) for line in lines):
            return f"{table['name']}[{extra}]"
    return str(table["name"])


def code(cell: str) -> str:
    return cell.strip("`")


@pytest.fixture(scope="module")
def noxfile() -> ModuleType:
    return load_repository_module("noxfile.py")


def test_version_rows_match_the_pyprojects() -> None:
    versions, _ = readme_tables()
    rows = {row[0]: row[1] for row in versions}
    workspace = project(".")
    members = [*ROOT.glob("packages/*/pyproject.toml"), ROOT / "tests-shared/pyproject.toml"]
    member_tables = [tomllib.loads(path.read_text())["project"] for path in members]

    assert code(rows["every `dex-agents*` package and `dex-local-engine`"]) == workspace["version"]
    assert {table["version"] for table in member_tables} == {workspace["version"]}

    sdk_pins = {
        line.removeprefix("dex-python-sdk")
        for table in member_tables
        for line in table["dependencies"]
        if line.startswith("dex-python-sdk")
    }
    assert sdk_pins == {code(rows["Dex SDK (`dex-python-sdk`)"])}

    python = {table["requires-python"] for table in [workspace, *member_tables]}
    assert python == {rows["Python"].split(",")[0].strip("`")}


def test_framework_rows_are_the_ranges_compat_tests(noxfile: ModuleType) -> None:
    _, frameworks = readme_tables()
    expected: dict[tuple[str, str], tuple[SpecifierSet, Version]] = {}
    for directory, names in noxfile.FRAMEWORKS.values():
        for name in names:
            requirement = noxfile.claimed_requirement(directory, name)
            oldest = Version(noxfile.oldest_claimed(requirement).split("==", 1)[1])
            expected[(package_label(directory, name), name)] = (requirement.specifier, oldest)

    documented = {
        (code(row[0]), code(row[1])): (SpecifierSet(code(row[2])), Version(row[3]))
        for row in frameworks
    }

    assert documented == expected


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """Every file the script edits, copied into a tree of the same shape."""
    for path in load_repository_module("scripts/bump_version.py").files_to_bump(ROOT):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return tmp_path


def test_every_version_pin_and_install_line_moves_to_the_new_version(checkout: Path) -> None:
    script = load_repository_module("scripts/bump_version.py")
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
    # The documentation site's install lines move too.
    getting_started = (checkout / "docs" / "getting-started.md").read_text()
    assert f"pip install dex-agents-pydantic-ai=={NEW}" in getting_started


@pytest.mark.parametrize("version", ["", "two", "1.0-final", __version__])
def test_a_bad_or_unchanged_version_is_refused_and_nothing_is_written(
    checkout: Path, version: str
) -> None:
    before = {path: path.read_text() for path in checkout.rglob("*.*")}
    with pytest.raises(ValueError, match=r"version|already at"):
        load_repository_module("scripts/bump_version.py").bump(checkout, version)
    assert {path: path.read_text() for path in checkout.rglob("*.*")} == before
