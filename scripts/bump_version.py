"""Move every package of the workspace to a new version at once.

    uv run python scripts/bump_version.py 0.2.0

Sets the version of the workspace root and of every member's pyproject (the examples'
too), every ``dex-agents==`` / ``dex-local-engine==`` pin (dependencies, and install
lines of the READMEs and the ``docs/`` pages) and the version row of the root README's
table, then runs ``uv lock``. ``dex-agents version`` and ``nox -s packaging`` then prove
the line holds. Only the standard library.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A PEP 440 version as we release them: release segments, then an optional pre, post or dev.
VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")


def current_version(root: Path) -> str:
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def files_to_bump(root: Path) -> list[Path]:
    members = [
        *sorted(root.glob("packages/*")),
        root / "tests-shared",
        *sorted(root.glob("examples/*")),
    ]
    pyprojects = [root / "pyproject.toml", *(member / "pyproject.toml" for member in members)]
    readmes = [root / "README.md", *(member / "README.md" for member in members)]
    pages = sorted(root.glob("docs/**/*.md"))  # the documentation site's install lines
    return [path for path in [*pyprojects, *readmes, *pages] if path.is_file()]


def bump_text(text: str, old: str, new: str) -> str:
    escaped = re.escape(old)
    # The [project] version line of a pyproject.
    text = re.sub(rf'(?m)^version = "{escaped}"$', f'version = "{new}"', text)
    # Pins of our own packages, in dependencies and in install lines.
    text = re.sub(rf"\b(dex-agents[\w-]*|dex-local-engine)=={escaped}\b", rf"\g<1>=={new}", text)
    # The root README's version table row.
    return re.sub(
        rf"(?m)^(\| every `dex-agents\*` package and `dex-local-engine` \| )`{escaped}`",
        rf"\g<1>`{new}`",
        text,
    )


def bump(root: Path, new: str) -> list[Path]:
    """Rewrite every file that names the current version; the files changed."""
    if not VERSION.fullmatch(new):
        raise ValueError(f"{new!r} is not a release version like 0.2.0 or 0.2.0.dev1")
    old = current_version(root)
    if new == old:
        raise ValueError(f"the workspace is already at {old}")
    changed: list[Path] = []
    for path in files_to_bump(root):
        text = path.read_text()
        bumped = bump_text(text, old, new)
        if bumped != text:
            path.write_text(bumped)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Move every package to a new version.")
    parser.add_argument("version", help="the new version, e.g. 0.2.0")
    parser.add_argument("--no-lock", action="store_true", help="do not run `uv lock`")
    args = parser.parse_args(argv)
    old = current_version(ROOT)
    try:
        changed = bump(ROOT, args.version)
    except ValueError as error:
        print(f"bump_version: {error}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"{old} -> {args.version}: {path.relative_to(ROOT)}")
    if not args.no_lock:
        subprocess.run(["uv", "lock"], cwd=ROOT, check=True)
    print("next: move the CHANGELOG's Unreleased entries, run `uv run dex-agents version`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
