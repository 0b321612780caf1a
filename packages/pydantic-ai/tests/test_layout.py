"""The package has the module layout of every runner package, and its old paths still work."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import dex_agents_pydantic_ai
from dex_agents_pydantic_ai import _mcp, _messages, _tools

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
DEPRECATED_MODULES = {"deferral", "mcp_keys", "messages", "runner", "session_history", "tool_step"}
"""Old public-looking paths that still import for one release, with a DeprecationWarning."""

OLD_NAMES: list[tuple[str, str, object]] = [
    *(
        ("runner", name, getattr(dex_agents_pydantic_ai, name))
        for name in ("DepsFactory", "PydanticAIRunner")
    ),
    *(
        ("deferral", name, getattr(_tools, name))
        for name in (
            "DeferEveryToolCall",
            "RefuseToolDeferral",
            "RunSettingsSeen",
            "tool_deferred_its_call",
        )
    ),
    ("mcp_keys", "stamp_mcp_idempotency_keys", _mcp.stamp_mcp_idempotency_keys),
    *(
        ("messages", name, getattr(_messages, name))
        for name in (
            "EMPTY_FRAMEWORK_ITEM",
            "answer_orphaned_tool_calls",
            "decode_history",
            "encode_framework_item",
            "project_message",
            "project_messages",
            "tool_results_request",
            "user_prompt_message",
        )
    ),
    *(
        ("session_history", name, getattr(_messages, name))
        for name in ("DEFAULT_KEPT_SESSIONS", "SessionHistories")
    ),
    *(
        ("tool_step", name, getattr(_tools, name))
        for name in ("resolve_model", "run_tool_directly")
    ),
]


def test_the_package_has_the_runner_layout() -> None:
    package = Path(dex_agents_pydantic_ai.__file__).parent
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
    old = importlib.import_module(f"dex_agents_pydantic_ai.{module}")
    with pytest.warns(DeprecationWarning, match=rf"dex_agents_pydantic_ai\.{module}\.{name} is"):
        served = getattr(old, name)
    assert served is value
