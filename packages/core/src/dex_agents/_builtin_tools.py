"""Definitions of the built-in tools the session itself handles.

A runner offers the definitions named in ``turn.enabled_built_in_tools`` to its
model and returns their calls like any other call; ``RunModel`` routes a call of
an enabled built-in tool to the session (``ask_user`` to ``AwaitQuestionAnswer``,
``durable_wait`` to ``AwaitTimer``). The names, descriptions and schemas are part
of what models see, so keep them stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from dex_agents._contract import ResolvedToolPolicy
from dex_agents._values import ToolEffect

__all__ = [
    "ASK_USER",
    "BUILT_IN_TOOL_NAMES",
    "BUILT_IN_TOOL_POLICY",
    "DURABLE_WAIT",
    "WRITE_TODOS",
    "BuiltInToolDefinition",
    "builtin_tool_definitions",
    "enabled_builtin_tool_definitions",
    "validate_built_in_tool_names",
]

ASK_USER: Final = "ask_user"
"""The built-in tool that asks the user a question and waits for the answer."""
DURABLE_WAIT: Final = "durable_wait"
"""The built-in tool that waits a number of seconds on a durable Timer."""
WRITE_TODOS: Final = "write_todos"
"""The built-in tool that writes the session's plan."""

BUILT_IN_TOOL_POLICY: Final = ResolvedToolPolicy(ToolEffect.READ, False)
"""The fixed policy of every built-in tool call: it runs in the session, needs no approval."""


@dataclass(frozen=True)
class BuiltInToolDefinition:
    """Name, description and JSON Schema of one built-in tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]


_ASK_USER_DEFINITION = BuiltInToolDefinition(
    name=ASK_USER,
    description=(
        "Ask the user a question and wait for the answer. Use it when you need information "
        "or a decision only the user can give. Offer `choices` when the answer is one of a "
        "few options; set `allows_free_text` to false to accept only those choices. The "
        "result is the user's answer, or a note that the user declined to answer."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": "The question to show the user.",
            },
            "choices": {
                "type": ["array", "null"],
                "items": {"type": "string"},
                "description": "Answers the user can pick from, if any.",
            },
            "allows_free_text": {
                "type": ["boolean", "null"],
                "description": (
                    "Whether the user may answer with any text; true when omitted. "
                    "Only meaningful with choices."
                ),
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
)

_DURABLE_WAIT_DEFINITION = BuiltInToolDefinition(
    name=DURABLE_WAIT,
    description=(
        "Pause this task for a number of seconds on a durable timer, then continue. The "
        "wait survives restarts, so it can last minutes or days. Use it to wait before "
        "checking something again; say why in `reason`."
    ),
    parameters={
        "type": "object",
        "properties": {
            "duration_seconds": {
                "type": "integer",
                "minimum": 1,
                "description": "How long to wait, in whole seconds.",
            },
            "reason": {
                "type": "string",
                "description": "Why you are waiting, shown to the user.",
            },
        },
        "required": ["duration_seconds", "reason"],
        "additionalProperties": False,
    },
)

_WRITE_TODOS_DEFINITION = BuiltInToolDefinition(
    name=WRITE_TODOS,
    description=(
        "Write your plan as a list of tasks. Each call replaces the whole plan, so send every "
        "task each time, with its status: pending, in_progress or completed. Keep the "
        "statuses current as you work. Send an empty list to clear the plan."
    ),
    parameters={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What the task does."},
                        "status": {
                            "type": "string",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
                "description": "Every task of the plan, in order.",
            },
        },
        "required": ["todos"],
        "additionalProperties": False,
    },
)

builtin_tool_definitions: Final[Mapping[str, BuiltInToolDefinition]] = MappingProxyType(
    {
        ASK_USER: _ASK_USER_DEFINITION,
        DURABLE_WAIT: _DURABLE_WAIT_DEFINITION,
        WRITE_TODOS: _WRITE_TODOS_DEFINITION,
    }
)
"""Every built-in tool by name, in the order a runner offers them."""

BUILT_IN_TOOL_NAMES: Final[tuple[str, ...]] = tuple(builtin_tool_definitions)
"""Every built-in tool's name, the names reserved for them."""


def validate_built_in_tool_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple without repeats; ``ValueError`` for an unknown name."""
    result: list[str] = []
    for name in names:
        if name not in builtin_tool_definitions:
            known = ", ".join(BUILT_IN_TOOL_NAMES)
            raise ValueError(f"unknown built-in tool {name!r}; the built-in tools are {known}")
        if name not in result:
            result.append(name)
    return tuple(result)


def enabled_builtin_tool_definitions(names: Iterable[str]) -> tuple[BuiltInToolDefinition, ...]:
    """The definitions of ``names``, in ``builtin_tool_definitions`` order."""
    enabled = set(validate_built_in_tool_names(names))
    return tuple(
        definition for name, definition in builtin_tool_definitions.items() if name in enabled
    )
