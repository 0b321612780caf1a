"""One running app (engine, Worker, HTTP server) for the whole test session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from app_server import RunningApp


@pytest.fixture(scope="session")
def running_app() -> Iterator[RunningApp]:
    app = RunningApp()
    app.start()
    yield app
    app.stop()
