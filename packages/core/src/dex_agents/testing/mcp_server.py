"""The MCP test server of the testing kit (the ``mcp`` extra: ``dex-agents[mcp]``).

Run it as ``python -m dex_agents.testing.mcp_server --log FILE`` (stdio) or with
``--http PORT`` (Streamable HTTP on loopback); ``McpHttpTestServer`` runs the HTTP
server as a child process, ``StdioAndHttpMcpServers`` gives a test the same server
over both transports, and ``read_calls`` reads the ``tools/call`` log: the tool, its
arguments and the idempotency key each call sent. A conformance scenario that asks for
its tools (``ScenarioSession.mcp_server_url``) gets them from ``dex_agents.testing``'s
``scenario_mcp_tools``.
"""

from dex_agents._deprecation import moved_names as _moved_names
from dex_agents.testing._mcp_server import McpHttpTestServer, main, read_calls
from dex_agents.testing._mcp_transports import StdioAndHttpMcpServers

__all__ = [
    "McpHttpTestServer",
    "StdioAndHttpMcpServers",
    "main",
    "read_calls",
]

__getattr__ = _moved_names(
    __name__,
    {
        name: "dex_agents.testing._mcp_server"
        for name in ("HTTP_READY_LINE", "IDEMPOTENCY_META_KEY", "build_server")
    },
)

if __name__ == "__main__":
    main()
