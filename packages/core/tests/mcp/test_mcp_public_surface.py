"""The public surface of ``dex_agents.mcp``: a change to it is deliberate.

The modules inside are private; the paths users could import before 0.3 keep working
for one release with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import dex_agents.mcp as mcp

PUBLIC = [
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_IDEMPOTENCY_KEY_META_KEY",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "RESOURCE_AND_PROMPT_TOOL_NAMES",
    "TASKS_EXTENSION_ID",
    "McpHttpServer",
    "McpServerConfig",
    "McpStdioServer",
    "McpTaskPollError",
    "McpTool",
    "McpToolCallInterruptedError",
    "McpToolSource",
    "load_mcp_server_configs",
    "mcp_tool_name",
    "tool_call_meta",
    "tool_effect_from_mcp_tool_annotations",
]


def test_the_public_names_are_these() -> None:
    assert sorted(mcp.__all__) == sorted(PUBLIC)


def test_every_public_class_and_function_has_a_docstring() -> None:
    for name in mcp.__all__:
        value = getattr(mcp, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
        if inspect.isclass(value):
            for member, attribute in vars(value).items():
                if member.startswith("_"):
                    continue
                if inspect.isfunction(attribute) or isinstance(attribute, property):
                    assert inspect.getdoc(attribute), f"{name}.{member}"


def test_every_module_inside_is_private() -> None:
    modules = {path.stem for path in Path(mcp.__path__[0]).glob("*.py")}
    deprecated = {"source", "config", "naming", "resource_tools", "tasks"}
    assert {m for m in modules if not m.startswith("_")} == deprecated


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("dex_agents.mcp.source", "McpToolSource", mcp.McpToolSource),
        ("dex_agents.mcp.source", "McpTool", mcp.McpTool),
        ("dex_agents.mcp.config", "load_mcp_server_configs", mcp.load_mcp_server_configs),
        ("dex_agents.mcp.naming", "mcp_tool_name", mcp.mcp_tool_name),
        (
            "dex_agents.mcp.resource_tools",
            "RESOURCE_AND_PROMPT_TOOL_NAMES",
            mcp.RESOURCE_AND_PROMPT_TOOL_NAMES,
        ),
        ("dex_agents.mcp.tasks", "TASKS_EXTENSION_ID", mcp.TASKS_EXTENSION_ID),
    ],
)
def test_old_module_paths_still_work_with_a_deprecation_warning(
    module: str, name: str, new: object
) -> None:
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match="import it from dex_agents.mcp"):
        assert getattr(old, name) is new


def test_an_old_path_to_an_implementation_name_warns_too() -> None:
    old = importlib.import_module("dex_agents.mcp.tasks")
    with pytest.warns(DeprecationWarning, match="dex_agents.mcp._tasks"):
        assert old.TaskContinuation().status is None
    with pytest.raises(AttributeError):
        _ = old.no_such_name
