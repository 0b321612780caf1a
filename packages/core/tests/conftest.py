"""Fixtures shared by the core's tests: the Flows of ``worker_flows/``, which a test
builds for its Client and its Worker children import by path."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

WORKER_FLOWS = Path(__file__).resolve().parent / "worker_flows"


@pytest.fixture(scope="session")
def worker_flow() -> Callable[[str], Any]:
    """``worker_flow("gated_agent")``: the first Flow of that module's ``build_flows()``."""

    def load(module_name: str) -> Any:
        sys.path.insert(0, str(WORKER_FLOWS))
        try:
            module = importlib.import_module(module_name)
        finally:
            sys.path.remove(str(WORKER_FLOWS))
        return module.build_flows()[0]

    return load


@pytest.fixture(scope="session")
def worker_flows_environment() -> dict[str, str]:
    """The environment a Worker child needs to import ``worker_flows/`` modules."""
    return {
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(WORKER_FLOWS), os.environ.get("PYTHONPATH")])
        )
    }
