"""The package has the module layout of every runner package, and its old paths still work."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import dex_agents_langgraph
from dex_agents_langgraph import _messages, conformance

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
DEPRECATED_MODULES = {"messages", "runner"}
"""Old public-looking paths that still import for one release, with a DeprecationWarning."""

OLD_NAMES: list[tuple[str, str, object]] = [
    *(
        ("runner", name, getattr(dex_agents_langgraph, name))
        for name in (
            "DEX_TOOL_EXECUTION_KEY",
            "IDEMPOTENCY_KEY_CONFIG_KEY",
            "LangGraphRunner",
            "idempotency_key_of",
            "tool_execution_of",
        )
    ),
    *(
        ("messages", name, getattr(_messages, name))
        for name in (
            "RequestedToolCall",
            "framework_message_of",
            "framework_messages_of",
            "message_from_framework_item",
            "message_text",
            "message_to_framework_item",
            "pair_tool_calls_with_results",
            "result_message_of",
            "stored_messages",
            "tool_calls_of",
            "unanswered_tool_calls",
            "user_message",
        )
    ),
    *(
        ("testing", name, getattr(conformance, name))
        for name in ("SCRIPTED_USAGE_METADATA", "ScriptedChatModel", "scenario_tool")
    ),
]


def test_the_package_has_the_runner_layout() -> None:
    package = Path(dex_agents_langgraph.__file__).parent
    modules = {info.name for info in pkgutil.iter_modules([str(package)])}
    assert modules == RUNNER_MODULES | DEPRECATED_MODULES
    assert (package / "py.typed").is_file()


def _test_id(value: object) -> str:
    """A test ID without a memory address, so every xdist worker collects the same tests."""
    return value if isinstance(value, str) else getattr(value, "__name__", type(value).__name__)


@pytest.mark.parametrize(("module", "name", "value"), OLD_NAMES, ids=_test_id)
def test_an_old_path_still_serves_its_name_with_a_deprecation_warning(
    module: str, name: str, value: object
) -> None:
    old = importlib.import_module(f"dex_agents_langgraph.{module}")
    with pytest.warns(DeprecationWarning, match=rf"dex_agents_langgraph\.{module}\.{name} is"):
        served = getattr(old, name)
    assert served is value
