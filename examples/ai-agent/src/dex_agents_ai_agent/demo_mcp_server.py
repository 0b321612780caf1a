"""The credential-free demo MCP servers (stdio): ``python -m dex_agents_ai_agent.demo_mcp_server
search|slack|google_docs``.

The app runs the three by default (``tools.demo_mcp_servers``; ``mcp-servers.local.yaml``
lists them too). Their tools are the functions of ``demo_tools.py``, with
``readOnlyHint`` set on the reads, so a server trusting annotations runs them
without approval.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from dex_agents_ai_agent.demo_tools import DEMO_SERVER_FUNCTIONS


def build_demo_server(name: str) -> MCPServer:
    """The demo server ``name``; ``KeyError`` for a name that is not a demo server."""
    functions = DEMO_SERVER_FUNCTIONS[name]
    server = MCPServer(name)
    for function, description, read_only in functions:
        tool_name = function.__name__.lstrip("_")
        annotations = ToolAnnotations(read_only_hint=read_only, destructive_hint=not read_only)
        server.tool(name=tool_name, description=description, annotations=annotations)(function)
    return server


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1 or arguments[0] not in DEMO_SERVER_FUNCTIONS:
        names = ", ".join(sorted(DEMO_SERVER_FUNCTIONS))
        raise SystemExit(f"usage: python -m dex_agents_ai_agent.demo_mcp_server <{names}>")
    build_demo_server(arguments[0]).run("stdio")


if __name__ == "__main__":
    main()
