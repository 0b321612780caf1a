"""A stdio MCP server for the MCP test: records every run in the file named by argv[1]."""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    with open(sys.argv[1], "a") as log:
        log.write(f"lookup_order {order_id}\n")
    return f"order {order_id} shipped"


@server.tool()
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    with open(sys.argv[1], "a") as log:
        log.write(f"cancel_order {order_id}\n")
    return f"order {order_id} cancelled"


if __name__ == "__main__":
    server.run("stdio")
