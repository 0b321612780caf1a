"""Stepwise has the module layout of every runner package, and its old public path works."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import dex_agents.stepwise
from dex_agents.stepwise import _compaction

RUNNER_MODULES = {
    "_flow",
    "_runner",
    "_messages",
    "_tools",
    "_compaction",
    "_mcp",
    "conformance",
    "testing",
}
DEPRECATED_MODULES = {"compaction"}
"""Old public-looking paths that still import for one release, with a DeprecationWarning."""


def test_the_package_has_the_runner_layout() -> None:
    modules = {info.name for info in pkgutil.iter_modules(dex_agents.stepwise.__path__)}
    assert modules == RUNNER_MODULES | DEPRECATED_MODULES


@pytest.mark.parametrize("name", _compaction.__all__)
def test_the_old_compaction_module_still_serves_its_names(name: str) -> None:
    old = importlib.import_module("dex_agents.stepwise.compaction")
    with pytest.warns(DeprecationWarning, match=rf"dex_agents.stepwise.compaction.{name} is"):
        value = getattr(old, name)
    assert value is getattr(_compaction, name)


def test_the_testing_module_serves_the_scripted_model() -> None:
    from dex_agents.models import ScriptedModelClient
    from dex_agents.stepwise.testing import ScriptedModelClient as Scripted

    assert Scripted is ScriptedModelClient
