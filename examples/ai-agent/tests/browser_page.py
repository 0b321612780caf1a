"""One headless Debian Chromium page for the browser tests (Playwright), set up alike.

The tests skip, with the reason, when Playwright or Chromium is missing; CI installs
the Debian ``chromium`` package and Playwright comes with the dev dependencies.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Page, ViewportSize

CHROMIUM = os.environ.get("DEX_AGENTS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 30_000
DESKTOP: ViewportSize = {"width": 1180, "height": 900}


def skip_reason() -> str:
    """Why the browser tests cannot run here, or ``""`` when they can."""
    try:
        import playwright.async_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return "playwright is not installed (it is a dev dependency: uv sync)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (CI installs the Debian chromium package)"
    return ""


needs_chromium = pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "runs")
"""Mark a module (``pytestmark = needs_chromium``) whose tests open a page."""

if not skip_reason():
    from playwright.async_api import expect as _expect

    # The machine may be busy (MCP children start per call): wait as long as any action.
    _expect.set_options(timeout=TIMEOUT_MS)


@asynccontextmanager
async def chromium_page(
    *,
    viewport: ViewportSize | None = DESKTOP,
    console_errors: list[str] | None = None,
    args: Sequence[str] = (),
) -> AsyncGenerator[Page]:
    """A fresh page in a new headless Chromium, closed on the way out.

    Every action and expectation waits up to ``TIMEOUT_MS``. With ``console_errors``,
    the page's console errors and uncaught exceptions are appended to that list.
    ``viewport=None`` keeps Chromium's default size; ``args`` are more Chromium flags
    (such as ``--host-resolver-rules``).
    """
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *args], headless=True
        )
        try:
            page = await (browser.new_page(viewport=viewport) if viewport else browser.new_page())
            page.set_default_timeout(TIMEOUT_MS)
            if console_errors is not None:
                errors = console_errors
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
        finally:
            await browser.close()


def app_page_url(base_url: str) -> str:
    """The AI Agent page (its Portal until an Agent starts) of the app at ``base_url``."""
    return f"{base_url}/products/ai-agent/"


async def start_agent(page: Page) -> None:
    """Start an Agent from the Portal and wait for its conversation page."""
    from playwright.async_api import expect

    await page.get_by_role("button", name="Start AI Agent →").click()
    await expect(page).to_have_url(re.compile(r"\?workflowId=[0-9a-f-]{36}$"))
