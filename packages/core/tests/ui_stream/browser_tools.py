"""Real browser-side clients for the UI stream tests: the `ai` npm package under node, and
headless Chromium through Playwright. Each returns a skip reason when it cannot run here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import Page

AI_PACKAGE = "ai@7.0.173"
"""The AI SDK release the tests run; its UIMessageChunk schema validates every part."""
ESBUILD_PACKAGE = "esbuild@0.28.2"
"""Bundles the AI SDK chat page for Chromium (the `ai` ESM build needs a bundler)."""
CHAT_SCRIPTS = ("ai_chat_scenario.mjs", "ai_chat_client.mjs", "ai_chat_page.mjs")
"""The chat client scripts, copied next to ``node_modules`` so ``import "ai"`` resolves."""
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
    """``(directory with node_modules/ai and the chat scripts, "")``, or ``(None, why not)``."""
    directory, reason = _npm_install(AI_PACKAGE)
    if directory is not None:
        for script in CHAT_SCRIPTS:
            shutil.copy(Path(__file__).parent / script, directory / script)
    return directory, reason


def bundle_chat_page(directory: Path) -> tuple[str | None, str]:
    """``(the browser bundle of ai_chat_page.mjs, "")``, or ``(None, why not)``."""
    installed, reason = _npm_install(ESBUILD_PACKAGE)
    if installed is None:
        return None, reason
    esbuild = str(directory / "node_modules" / ".bin" / "esbuild")
    result = _run(
        [esbuild, "ai_chat_page.mjs", "--bundle", "--platform=browser", "--format=esm"],
        directory,
    )
    if result.returncode != 0:
        return None, f"esbuild could not bundle the chat page: {result.stderr.strip()[-500:]}"
    return result.stdout, ""


def _npm_install(package: str) -> tuple[Path | None, str]:
    """Install ``package`` once into the shared npm cache directory."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm are not installed (CI installs nodejs and npm)"
    directory = npm_cache_directory()
    marker = directory / f".installed-{package}"
    if marker.exists():
        return directory, ""
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "package.json").exists():
        (directory / "package.json").write_text(
            '{"name": "dex-agents-ui-tests", "private": true}\n'
        )
    result = _run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", package], directory
    )
    if result.returncode != 0:
        return None, f"npm install {package} failed: {result.stderr.strip()[-500:]}"
    marker.write_text("ok\n")
    return directory, ""


def _run(command: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=directory, capture_output=True, text=True, timeout=300, check=False
    )


@asynccontextmanager
async def chromium_page() -> AsyncIterator[Page]:
    """A page in headless Debian Chromium (check ``chromium_skip_reason`` first)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield await browser.new_page()
        finally:
            await browser.close()


def chromium_skip_reason() -> str:
    """``""`` when Playwright and the Chromium binary are present, else why not."""
    try:
        import playwright.async_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return "playwright is not installed (it is a dev dependency: uv sync)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (CI installs the Debian chromium package)"
    return ""


def assert_chat_scenario_report(report: dict[str, Any], *, charges: list[str]) -> None:
    """Check the report of ``runChatScenario`` (ai_chat_scenario.mjs), node or browser."""
    messages = report["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3
    assert [m["id"] for m in messages[1::2]] == [
        "turn-1-assistant",
        "turn-2-assistant",
        "turn-3-assistant",
    ]

    def texts(message: dict[str, Any]) -> list[str]:
        return [p["text"] for p in message["parts"] if p["type"] == "text"]

    assert texts(messages[1]) == ["Hello there"]
    approved = messages[3]
    tools = {p["toolCallId"]: p for p in approved["parts"] if p["type"] == "dynamic-tool"}
    assert tools["r1"]["state"] == "output-available"
    assert tools["r1"]["output"] == "book: in stock"
    assert tools["w1"]["state"] == "output-available"
    assert tools["w1"]["output"] == "charged 500"
    assert tools["w1"]["approval"]["approved"] is True
    assert texts(approved) == ["Checking.", "Done: lookup succeeded, charge succeeded."]
    assert len(charges) == 1

    assert report["statusAfterDrop"] == "error"
    assert report["partialText"] == "part one. "
    assert report["hadToken"] is True
    # Rebuilt after the reconnect: one text part, nothing lost or repeated.
    assert texts(messages[5]) == ["part one. part two."]
    assert report["finishes"] == ["stop", "tool-calls", "stop", "transport-error", "stop"]
