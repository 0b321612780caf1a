"""Real browser-side clients for the UI stream tests: the `ai` npm package under node, and
headless Chromium through Playwright. Each returns a skip reason when it cannot run here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

AI_PACKAGE = "ai@7.0.173"
"""The AI SDK release the tests run; its UIMessageChunk schema validates every part."""
CHROMIUM = os.environ.get("DEX_AGENTS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def npm_cache_directory() -> Path:
    configured = os.environ.get("DEX_AGENTS_NPM_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "dex-agents-tests" / "npm-ai"


def install_ai_package() -> tuple[Path | None, str]:
    """``(directory with node_modules/ai, "")``, or ``(None, why not)``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm are not installed (CI installs nodejs and npm)"
    directory = npm_cache_directory()
    marker = directory / f".installed-{AI_PACKAGE}"
    if marker.exists():
        return directory, ""
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "package.json").exists():
        (directory / "package.json").write_text(
            '{"name": "dex-agents-ui-tests", "private": true}\n'
        )
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", AI_PACKAGE],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        return None, f"npm install {AI_PACKAGE} failed: {result.stderr.strip()[-500:]}"
    marker.write_text("ok\n")
    return directory, ""


def chromium_skip_reason() -> str:
    """``""`` when Playwright and the Chromium binary are present, else why not."""
    try:
        import playwright.async_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return "playwright is not installed (it is a dev dependency: uv sync)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (CI installs the Debian chromium package)"
    return ""
