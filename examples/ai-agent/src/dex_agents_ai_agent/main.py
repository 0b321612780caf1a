"""``dex-agents-ai-agent``: serve the app on the embedded engine (or a Dex server) and
print its URL."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import uvicorn

from dex_agents import AgentHost
from dex_agents_ai_agent.agent import DEFAULT_RETAINED_MESSAGES, create_ai_agent_flow
from dex_agents_ai_agent.app import PREFIX, create_app
from dex_agents_ai_agent.tools import (
    MCP_CONFIG_VARIABLE,
    ToolCatalog,
    demo_mcp_servers,
    load_mcp_config,
)

ENV_FILE = Path("examples/.env")


def load_env_file(path: Path) -> None:
    """``KEY=value`` lines into the environment; variables already set win."""
    if not path.is_file():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        key, separator, value = line.strip().partition("=")
        if separator and key and not key.startswith("#"):
            os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="dex-agents-ai-agent", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--db", default="ai-agent.sqlite3", help="SQLite file of the embedded engine"
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("DEX_SERVER_ADDRESS"),
        help="host:port of a Dex server (default: $DEX_SERVER_ADDRESS, else the embedded engine)",
    )
    parser.add_argument(
        "--mcp-config",
        default=os.environ.get(MCP_CONFIG_VARIABLE),
        help=f"YAML file of trusted MCP servers (default: ${MCP_CONFIG_VARIABLE}, else the demo)",
    )
    demo = parser.add_mutually_exclusive_group()
    demo.add_argument(
        "--no-demo-servers", action="store_true", help="do not offer the demo MCP servers"
    )
    demo.add_argument(
        "--in-process-demo",
        action="store_true",
        help="run the demo tools in this process instead of as stdio MCP servers",
    )
    parser.add_argument(
        "--no-worker",
        action="store_true",
        help="run no Worker here (Workers run apart, against --server)",
    )
    return parser.parse_args(argv)


def build_catalog(arguments: argparse.Namespace) -> ToolCatalog:
    """The tools to offer: the config file's servers, else the demo servers over stdio
    MCP (or in-process with ``--in-process-demo``; none with ``--no-demo-servers``)."""
    if arguments.mcp_config:
        # Configured servers replace the demo servers (the same names would clash).
        return ToolCatalog.build(load_mcp_config(arguments.mcp_config), demo_servers=False)
    if arguments.no_demo_servers or arguments.in_process_demo:
        return ToolCatalog.build((), demo_servers=arguments.in_process_demo)
    return ToolCatalog.build(demo_mcp_servers(), demo_servers=False)


def main(argv: list[str] | None = None) -> None:
    load_env_file(ENV_FILE)
    arguments = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    retained = int(os.environ.get("DEX_AGENT_MESSAGE_RETENTION", DEFAULT_RETAINED_MESSAGES))
    catalog = build_catalog(arguments)
    flow = create_ai_agent_flow(catalog, retained_message_limit=retained)
    host = AgentHost(
        flow, database=arguments.db, server_address=arguments.server, worker=not arguments.no_worker
    )
    app = create_app(host, catalog, retained_messages=retained)
    print(f"AI Agent: http://{arguments.host}:{arguments.port}{PREFIX}/", flush=True)
    uvicorn.run(app, host=arguments.host, port=arguments.port, log_level="warning")


if __name__ == "__main__":
    main()
