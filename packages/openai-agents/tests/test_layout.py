"""The package has the module layout of every runner package, and its old paths still work."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import dex_agents_openai_agents
from dex_agents_openai_agents import _mcp, _messages, _tools

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
DEPRECATED_MODULES = {"deferral", "items", "mcp_keys", "run_state", "runner", "tool_guardrails"}
"""Old public-looking paths that still import for one release, with a DeprecationWarning."""

OLD_NAMES: list[tuple[str, str, object]] = [
    *(
        ("runner", name, getattr(dex_agents_openai_agents, name))
        for name in ("ContextFactory", "OpenAIAgentsRunner", "UnsupportedInterruptionError")
    ),
    *(
        ("items", name, getattr(_messages, name))
        for name in (
            "InputItem",
            "call_names",
            "framework_message_of",
            "message_text",
            "replay_items",
            "stored_item",
            "user_input_item",
        )
    ),
    *(
        ("run_state", name, getattr(_messages, name))
        for name in ("RUN_STATE_FORMAT", "StepRunState", "decode_run_state", "encode_run_state")
    ),
    *(
        ("deferral", name, getattr(_tools, name))
        for name in (
            "DeferringGraph",
            "ReplayFunction",
            "UnknownHandoffTargetError",
            "build_deferring_graph",
            "reachable_agents",
        )
    ),
    *(
        ("tool_guardrails", name, getattr(_tools, name))
        for name in ("check_tool_input", "check_tool_output")
    ),
    ("mcp_keys", "stamp_mcp_idempotency_keys", _mcp.stamp_mcp_idempotency_keys),
]


def test_the_package_has_the_runner_layout() -> None:
    package = Path(dex_agents_openai_agents.__file__).parent
    modules = {info.name for info in pkgutil.iter_modules([str(package)])}
    assert modules == RUNNER_MODULES | DEPRECATED_MODULES
    assert (package / "py.typed").is_file()


@pytest.mark.parametrize(("module", "name", "value"), OLD_NAMES, ids=lambda v: str(v)[:40])
def test_an_old_path_still_serves_its_name_with_a_deprecation_warning(
    module: str, name: str, value: object
) -> None:
    old = importlib.import_module(f"dex_agents_openai_agents.{module}")
    with pytest.warns(DeprecationWarning, match=rf"dex_agents_openai_agents\.{module}\.{name} is"):
        served = getattr(old, name)
    assert served is value
