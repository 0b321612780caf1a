"""The resource and prompt tools: ``mcp_list_resources_and_prompts``, ``mcp_read_resource``,
``mcp_get_prompt``.

Each is a ``read`` tool that takes a configured server's name. Outputs are the server's
items as JSON with sorted keys and Python's separators; whole numbers stay whole.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mcp import Client, MCPError
from pydantic import BaseModel

from dex_agents.models import ModelToolDefinition

__all__ = [
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "RESOURCE_AND_PROMPT_TOOL_NAMES",
    "resource_and_prompt_tool_definitions",
    "run_resource_or_prompt_tool",
]

MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME = "mcp_list_resources_and_prompts"
"""The tool that lists a server's resources, resource templates and prompts."""
MCP_READ_RESOURCE_TOOL_NAME = "mcp_read_resource"
"""The tool that reads one resource of a server by its URI."""
MCP_GET_PROMPT_TOOL_NAME = "mcp_get_prompt"
"""The tool that gets one prompt of a server, filled in with its arguments."""
RESOURCE_AND_PROMPT_TOOL_NAMES = (
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    MCP_GET_PROMPT_TOOL_NAME,
)
"""The three names, in the order ``list_tools`` offers them; key a policy by them."""
_METHOD_NOT_FOUND = -32601


def resource_and_prompt_tool_definitions(servers: Sequence[str]) -> list[ModelToolDefinition]:
    """The three tools, each taking one of ``servers`` as ``server``."""
    server = {
        "type": "string",
        "enum": list(servers),
        "description": "The name of the MCP server to ask.",
    }

    def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"server": server, **properties},
            "required": ["server", *required],
            "additionalProperties": False,
        }

    return [
        ModelToolDefinition(
            MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
            "List the resources, resource templates and prompts an MCP server offers.",
            schema({}, []),
        ),
        ModelToolDefinition(
            MCP_READ_RESOURCE_TOOL_NAME,
            "Read one resource of an MCP server by its URI.",
            schema({"uri": {"type": "string", "description": "The resource's URI."}}, ["uri"]),
        ),
        ModelToolDefinition(
            MCP_GET_PROMPT_TOOL_NAME,
            "Get a prompt of an MCP server, filled in with its arguments.",
            schema(
                {
                    "name": {"type": "string", "description": "The prompt's name."},
                    "arguments": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "The prompt's arguments by name.",
                    },
                },
                ["name"],
            ),
        ),
    ]


async def run_resource_or_prompt_tool(
    tool_name: str, arguments: dict[str, Any], client: Client
) -> str:
    """The tool's output text from a connected ``client``; ``MCPError`` propagates."""
    if tool_name == MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME:
        output = {
            "resources": await _every_page(client.list_resources, "resources"),
            "resource_templates": await _every_page(
                client.list_resource_templates, "resource_templates"
            ),
            "prompts": await _every_page(client.list_prompts, "prompts"),
        }
    elif tool_name == MCP_READ_RESOURCE_TOOL_NAME:
        result = await client.read_resource(_text_argument(arguments, "uri"))
        output = {"contents": [_item(content) for content in result.contents]}
    else:
        prompt_arguments: Any = arguments.get("arguments") or {}
        if not isinstance(prompt_arguments, dict) or not all(
            isinstance(value, str)
            for value in prompt_arguments.values()  # pyright: ignore[reportUnknownVariableType]
        ):
            raise ValueError("arguments must be an object of strings")
        result = await client.get_prompt(
            _text_argument(arguments, "name"),
            dict(prompt_arguments),  # pyright: ignore[reportUnknownArgumentType]
        )
        output = {
            "description": result.description,
            "messages": [_item(message) for message in result.messages],
        }
    return json.dumps(_whole_numbers(output), sort_keys=True)


def _text_argument(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


async def _every_page(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    while True:
        try:
            page = await list_page(cursor=cursor)
        except MCPError as error:
            # A server without resources or prompts lists none.
            if error.code == _METHOD_NOT_FOUND:
                return items
            raise
        items.extend(_item(item) for item in getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            return items


def _item(item: BaseModel) -> Any:
    return item.model_dump(mode="json", by_alias=True, exclude_none=True)


def _whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints, so a ``priority`` of 1 reads ``1`` everywhere."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value
