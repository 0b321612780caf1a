"""``dex-agents-ai-agent``: serve the app on the embedded engine (or a Dex server) and
print its URL."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import uvicorn

from dex_agents import AgentHost
from dex_agents_ai_agent.agent import DEFAULT_RETAINED_MESSAGES, create_ai_agent_flow
from dex_agents_ai_agent.app import PREFIX, create_app
from dex_agents_ai_agent.security import (
    TrustSettings,
    default_allowed_hosts,
    is_loopback,
    is_wildcard,
)
from dex_agents_ai_agent.tools import (
    MCP_CONFIG_VARIABLE,
    ToolCatalog,
    demo_mcp_servers,
    load_mcp_config,
)

ENV_FILE = Path("examples/.env")
ACCESS_TOKEN_VARIABLE = "DEX_AGENT_ACCESS_TOKEN"
MIN_TOKEN_LENGTH = 16


class StartError(SystemExit):
    """A start the command refuses, with the reason and what to do."""


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
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another host name browsers may use for this app (repeatable); by default "
        "only the bound address (and, on loopback, localhost)",
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


def trust_settings(arguments: argparse.Namespace, environ: Mapping[str, str]) -> TrustSettings:
    """Whom to serve: the Host names, and the access token a non-loopback bind needs."""
    token = environ.get(ACCESS_TOKEN_VARIABLE) or None
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise StartError(f"{ACCESS_TOKEN_VARIABLE} must be at least {MIN_TOKEN_LENGTH} characters")
    host: str = arguments.host
    extra = {name.strip().lower() for name in arguments.allowed_host if name.strip()}
    if is_wildcard(host):
        if not extra:
            raise StartError(
                f"--host {host} listens on every address: name the host names browsers use "
                "with --allowed-host NAME"
            )
        allowed = frozenset(extra)
    else:
        allowed = default_allowed_hosts(host) | extra
    if not is_loopback(host) and token is None:
        raise StartError(
            f"--host {host} serves other machines: set {ACCESS_TOKEN_VARIABLE} to a shared "
            f"token of at least {MIN_TOKEN_LENGTH} characters, which visitors enter to sign in"
        )
    return TrustSettings(allowed_hosts=allowed, access_token=token, prefix=PREFIX)


def main(argv: list[str] | None = None) -> None:
    load_env_file(ENV_FILE)
    arguments = parse_arguments(argv)
    trust = trust_settings(arguments, os.environ)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    retained = int(os.environ.get("DEX_AGENT_MESSAGE_RETENTION", DEFAULT_RETAINED_MESSAGES))
    catalog = build_catalog(arguments)
    flow = create_ai_agent_flow(catalog, retained_message_limit=retained)
    host = AgentHost(
        flow, database=arguments.db, server_address=arguments.server, worker=not arguments.no_worker
    )
    app = create_app(host, catalog, retained_messages=retained, trust=trust)
    shown = arguments.host if not is_wildcard(arguments.host) else sorted(trust.allowed_hosts)[0]
    shown = f"[{shown}]" if ":" in shown else shown
    print(f"AI Agent: http://{shown}:{arguments.port}{PREFIX}/", flush=True)
    if trust.access_token:
        print(f"Sign in with the token in ${ACCESS_TOKEN_VARIABLE}.", flush=True)
    uvicorn.run(app, host=arguments.host, port=arguments.port, log_level="warning")


if __name__ == "__main__":
    main()
