"""The checked-in browser bundle is built from the UI sources as they are now."""

from __future__ import annotations

import hashlib
from pathlib import Path

UI = Path(__file__).parents[1] / "ui"
STATIC = Path(__file__).parents[1] / "src" / "dex_agents_ai_agent" / "static"
# The same inputs, order and framing as ui/record-source-hash.mjs.
INPUTS = [
    "index.html",
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    "vite.config.ts",
    "src",
]


def files(path: Path) -> list[Path]:
    """Files under ``path``, each directory's names sorted, depth first (as the script)."""
    if path.is_dir():
        return [file for child in sorted(path.iterdir()) for file in files(child)]
    return [path]


def source_hash() -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        for file in files(UI / name):
            digest.update(f"{file.relative_to(UI).as_posix()}\n".encode())
            digest.update(file.read_bytes())
            digest.update(b"\n")
    return digest.hexdigest()


def test_the_bundle_is_fresh_with_its_sources() -> None:
    recorded = (STATIC / "source-hash.txt").read_text().strip()
    assert recorded == source_hash(), (
        "the UI sources changed since the bundle was built: "
        "cd examples/ai-agent/ui && npm ci && npm run build"
    )


def test_the_bundle_is_shipped() -> None:
    index = (STATIC / "index.html").read_text()
    assert "/products/ai-agent/assets/app.js" in index
    assert (STATIC / "assets" / "app.js").stat().st_size > 10_000
